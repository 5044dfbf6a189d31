"""The drop-in module works for every dev problem whose parameters fit in 1 GB (issue 12).

For each KernelBench-format file under $KERNELGATE_DEV_PROBLEMS (level1/, level2/, level3/), the drop-in
is emitted exactly as kernelgate emits it (`emit.emit` over a candidate source) for two candidates:

* `baseline`: the reference kept (`emit.baseline_source(..., "eager")`, ModelNew is Model itself);
* `wrapped`: a ModelNew subclassing the reference whose forward wraps the reference's (and counts its calls,
  so the test sees which path a call took).

The emitted file is imported as a fresh module, `Model(*get_init_inputs())` is constructed through the name
a user imports, the reference's state_dict is loaded (strict), and outputs are compared with the reference's:
in eval mode under no_grad (the verified mode: the fast path, i.e. the candidate's forward, must run) and in
training mode (the reference path must run; buffers such as running statistics must follow).

Problems whose parameters exceed 1 GB (counted on the meta device) are skipped. Where a problem's own
sizes are too big for a CPU test, the test shrinks them without touching the shared files: it loads the
problem and overrides its module-level integer constants (and int elements of tuple constants) in the
loaded module's namespace, halving the largest ones (equal values together, so shapes derived from the
same constant stay consistent) while an estimate of the work (FLOPs, bytes written, op count, input and
parameter bytes, measured by running the problem on the meta device, in training mode where it runs there)
is over budget; a halving the problem rejects (an error on the meta device, an empty output) or that lowers
none of the figures over budget is undone and that constant left alone. Nothing here names a problem or a
shape; a problem that imports a package not installed is skipped with its name.

`check_problem` is also what benchmarks/dropin_dev.py runs to write benchmarks/results/dropin_dev_cpu.json.
"""
from __future__ import annotations

import gc
import importlib.util
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from kernelgate import emit
from kernelgate.errors import KernelgateError
from kernelgate.workload import import_file

pytestmark = pytest.mark.slow

ENV = "KERNELGATE_DEV_PROBLEMS"
PARAM_LIMIT = 1 << 30               # bytes of parameters at the problem's own sizes: over this, skipped

# Budget of the shrunk problem (per forward unless said): estimated seconds on a small CPU, input bytes,
# parameter bytes (three models are constructed). Rates are rough 2-core CPU figures.
FLOP_RATE = 2e10                     # FLOP/s
BYTE_RATE = 2e9                      # bytes written by ops per second
OP_COST = 3e-6                       # seconds of dispatch overhead per op
FORWARD_BUDGET_S = 0.05
INPUT_BUDGET = 16 << 20
PARAM_BUDGET = 256 << 20
META_MAX_S = 1.5                     # a meta forward still running after this is over budget
FIRST_TIER = 32                      # constants >= this are halved first; smaller ones (>= 2) only if still over


def problems() -> list[Path]:
    root = os.environ.get(ENV)
    if not root or not Path(root).is_dir():
        return []
    return sorted(Path(root).glob("level*/*.py"), key=lambda p: (p.parent.name, _num(p.name), p.name))


def _num(name: str) -> int:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


# ----------------------------------------------------------------------------------- shrinking
Slot = tuple[str, Any]               # (constant name, None) or (constant name, index in a tuple/list)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def constant_slots(mod) -> dict[Slot, int]:
    """The module's public int constants and the int elements of its tuple/list constants."""
    out: dict[Slot, int] = {}
    for name, v in vars(mod).items():
        if name.startswith("_"):
            continue
        if _is_int(v):
            out[(name, None)] = v
        elif isinstance(v, (tuple, list)) and v and all(_is_int(e) for e in v):
            for i, e in enumerate(v):
                out[(name, i)] = e
    return out


def apply_overrides(mod, values: dict[Slot, int]) -> None:
    """Set constants (slots) in a loaded module's namespace; get_inputs/get_init_inputs read them at call time."""
    by_name: dict[str, dict[Any, int]] = {}
    for (name, idx), v in values.items():
        by_name.setdefault(name, {})[idx] = v
    for name, items in by_name.items():
        if None in items:
            setattr(mod, name, items[None])
            continue
        old = getattr(mod, name)
        new = list(old)
        for i, v in items.items():
            new[i] = v
        setattr(mod, name, type(old)(new))


class _Abort(Exception):
    """The meta forward went past the op cap or the time cap: over budget whatever else it does."""


class _Traffic(TorchDispatchMode):
    """Counts ops and the bytes of the (non-view) tensors they produce; stops the forward past the caps."""

    def __init__(self, max_ops: int, max_s: float):
        super().__init__()
        self.ops = 0
        self.bytes = 0
        self.max_ops, self.deadline = max_ops, time.perf_counter() + max_s

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not t._is_view():
                self.bytes += t.numel() * t.element_size()
        if self.ops > self.max_ops or (self.ops % 64 == 0 and time.perf_counter() > self.deadline):
            raise _Abort
        return out


def _tensors(x) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _build_meta(mod):
    """The model on the meta device: constructed there, or (a constructor that reads values, `.item()`)
    constructed on the CPU and moved."""
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            return mod.Model(*mod.get_init_inputs()), None
    except Exception as e:  # noqa: BLE001
        torch.manual_seed(0)
        return mod.Model(*mod.get_init_inputs()).to("meta"), f"{type(e).__name__}: {str(e)[:200]}"


def measure(mod, forward: bool = True) -> dict[str, Any]:
    """Sizes of the problem as its module's constants now stand, on the meta device (nothing allocated):
    parameter and input bytes and, with `forward`, the forward's FLOPs, bytes written and op count
    (None where the forward cannot run on the meta device; `aborted` past the caps, which are over budget).
    Raises what construction or inputs raise."""
    model, construct_error = _build_meta(mod)
    with torch.device("meta"):
        torch.manual_seed(0)
        xs = mod.get_inputs()
    xs = list(xs) if isinstance(xs, (tuple, list)) else [xs]
    xs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in xs]
    m = {"param_bytes": _nbytes(model.parameters()), "buffer_bytes": _nbytes(model.buffers()),
         "input_bytes": _nbytes(_tensors(xs)), "flops": None, "written": None, "ops": None, "meta_error": None,
         "aborted": False, "out_numel": None, "mode": None, "meta_construct_error": construct_error}
    if forward:                                     # training mode first: the test runs both, and it does more
        for mode in ("train", "eval"):
            model.train(mode == "train")
            fc, tr = FlopCounterMode(display=False), _Traffic(int(2 * FORWARD_BUDGET_S / OP_COST), META_MAX_S)
            try:
                with torch.no_grad(), fc, tr:
                    out = model(*xs)
            except _Abort:
                m.update(flops=fc.get_total_flops(), written=tr.bytes, ops=tr.ops, aborted=True, mode=mode)
            except Exception as e:  # noqa: BLE001 - a forward the meta device cannot run (data-dependent shapes...)
                m["meta_error"] = ((m["meta_error"] + "; ") if m["meta_error"] else "") + \
                    f"{mode}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                continue
            else:
                outs = _tensors(out)
                m.update(flops=fc.get_total_flops(), written=tr.bytes, ops=tr.ops, mode=mode,
                         out_numel=min((t.numel() for t in outs), default=0))
            break
    return m


def estimate_s(m: dict[str, Any]) -> float:
    """Estimated seconds of one forward (inputs' bytes standing in where the meta device could not run it)."""
    if m["flops"] is None:
        return 4 * m["input_bytes"] / BYTE_RATE
    return m["flops"] / FLOP_RATE + m["written"] / BYTE_RATE + m["ops"] * OP_COST


def loads(m: dict[str, Any]) -> tuple[float, float, float]:
    """The measurement against each budget (over 1: over it); an aborted meta forward is over."""
    est = estimate_s(m) / FORWARD_BUDGET_S
    return (max(est, 2.0) if m["aborted"] else est, m["input_bytes"] / INPUT_BUDGET,
            (m["param_bytes"] + m["buffer_bytes"]) / PARAM_BUDGET)


def over_budget(m: dict[str, Any]) -> bool:
    return max(loads(m)) > 1


def helps(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a halving cut some over-budget load by 10% or more (unknown after an aborted forward: kept)."""
    if old["aborted"] or new["aborted"]:
        return True
    return any(a > 1 and b <= 0.9 * a for a, b in zip(loads(old), loads(new)))


def shrink(mod, base: dict[str, Any]) -> tuple[dict[Slot, int], dict[str, Any], int]:
    """Halve the module's largest int constants (equal values together) while the problem is over budget.
    A halving that the meta device rejects, that empties an output or that helps no over-budget figure is
    undone and its slots frozen.
    Returns the overrides (slot -> value), the final measurement and the number of meta runs."""
    original = constant_slots(mod)
    current = dict(original)
    frozen: set[Slot] = set()
    m, runs = base, 0

    def attempt(slots: list[Slot]) -> dict[str, Any] | None:
        nonlocal runs
        trial = {**current, **{s: current[s] // 2 for s in slots}}
        apply_overrides(mod, trial)
        runs += 1
        try:
            t = measure(mod)
        except Exception:  # noqa: BLE001 - the problem rejects these sizes
            t = None
        if t is not None and base["mode"] is not None and (
                t["mode"] != base["mode"] or (not t["aborted"] and not t["out_numel"])):
            t = None                                    # the forward ran at full size (in that mode): it must still run
        if t is not None and not helps(m, t):
            t = None                                    # no load it was over went down: not worth changing
        if t is None:
            apply_overrides(mod, current)
            return None
        current.update({s: trial[s] for s in slots})
        return t

    while over_budget(m):
        floor = FIRST_TIER
        live = [s for s, v in current.items() if s not in frozen and v >= floor]
        if not live:
            floor = 2
            live = [s for s, v in current.items() if s not in frozen and v >= floor]
        if not live:
            break
        top = max(current[s] for s in live)
        group = [s for s in live if current[s] == top]
        t = attempt(group)
        if t is None and len(group) > 1:            # the equal constants one by one
            for s in group:
                t = attempt([s])
                if t is None:
                    frozen.add(s)
                else:
                    break
        elif t is None:
            frozen.update(group)
        if t is not None:
            m = t
    overrides = {s: v for s, v in current.items() if v != original[s]}
    return overrides, m, runs


# ----------------------------------------------------------------------------------- the drop-in
WRAPPED = '''

_dropin_test_calls = [0]


class ModelNew(Model):
    """A trivially different candidate: the reference's forward, wrapped (and counted)."""

    def forward(self, *args):
        _dropin_test_calls[0] += 1
        return super().forward(*args)
'''

CANDIDATES = ("baseline", "wrapped")


def candidate_source(source: str, kind: str) -> str:
    if kind == "baseline":
        return emit.baseline_source(source, "Model", "eager")
    return source.rstrip() + "\n" + WRAPPED


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _as_list(xs) -> list[Any]:
    return list(xs) if isinstance(xs, (tuple, list)) else [xs]


def compare(got, want, what: str) -> bool:
    """Same structure, dtypes and shapes; values close (fp32 re-computation tolerance). Returns bitwise equality."""
    g, gs = tree_flatten(got)
    w, ws = tree_flatten(want)
    assert gs == ws, f"{what}: output structure {gs} != {ws}"
    exact = True
    for i, (a, b) in enumerate(zip(g, w)):
        if not isinstance(b, torch.Tensor):
            assert a == b or (isinstance(b, float) and math.isnan(b) and math.isnan(a)), f"{what}[{i}]: {a} != {b}"
            continue
        assert isinstance(a, torch.Tensor), f"{what}[{i}]: {type(a).__name__}, not a tensor"
        assert a.dtype == b.dtype and a.shape == b.shape, \
            f"{what}[{i}]: {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
        if torch.equal(a, b):                       # the usual case: the same computation, bit for bit
            continue
        exact = False
        scale = b.abs().nan_to_num(0, 0, 0).max().item() if b.is_floating_point() and b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * max(1.0, scale), equal_nan=True,
                                   msg=lambda m: f"{what}[{i}]: {m}")
    return exact


def _run(model, xs, seed: int):
    torch.manual_seed(seed)                         # stochastic forwards (dropout in training mode) alike
    with torch.no_grad():
        return model(*xs)


def check_problem(path: Path, tmp: Path, rec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Emit the drop-in for both candidates and check it against the reference. Returns the record `rec`
    (filled as it goes, so a caller keeps what was found before a failure): outcome "matched" or "skipped"
    (with its reason); raises AssertionError, or what the drop-in raises, on a mismatch."""
    t0 = time.perf_counter()
    rec = {} if rec is None else rec
    rec["problem"] = f"{path.parent.name}/{path.name}"
    source = path.read_text()
    tag = f"{path.parent.name}_{path.stem}".replace("-", "_")
    try:
        ref_mod = import_file(str(path), f"_kg_dropin_ref_{tag}")
    except KernelgateError as e:
        if isinstance(e.__cause__, ModuleNotFoundError):   # a package the problem imports is not installed
            rec.update(outcome="skipped", reason=f"needs {e.__cause__.name} (not installed)",
                       seconds=round(time.perf_counter() - t0, 3))
            return rec
        raise
    try:
        base = measure(ref_mod)
        rec["param_bytes"] = base["param_bytes"]
        rec["buffer_bytes"] = base["buffer_bytes"]
        if base["param_bytes"] > PARAM_LIMIT:
            rec.update(outcome="skipped", reason=f"parameters {base['param_bytes'] / 2**30:.4f} GiB > 1 GiB",
                       seconds=round(time.perf_counter() - t0, 3))
            return rec
        rec["input_bytes"] = base["input_bytes"]
        rec["est_forward_s"] = estimate_s(base)
        for k in ("meta_construct_error", "meta_error"):
            if base[k]:
                rec[k] = base[k]
        rec["meta_aborted"] = base["aborted"]
        rec["meta_mode"] = base["mode"]
        overrides, m, runs = shrink(ref_mod, base)
        rec["shrunk_input_bytes"] = m["input_bytes"]
        rec["shrunk_param_bytes"] = m["param_bytes"]
        rec["shrunk_est_forward_s"] = estimate_s(m)
        rec["shrink_factor_inputs"] = (base["input_bytes"] / m["input_bytes"]) if m["input_bytes"] else None
        rec["shrink_factor_work"] = (estimate_s(base) / estimate_s(m)) if estimate_s(m) else None
        rec["still_over_budget"] = over_budget(m)
        rec["meta_runs"] = runs
        rec["overrides"] = {(n if i is None else f"{n}[{i}]"): v for (n, i), v in overrides.items()}
        rec["shrunk"] = bool(overrides)
        rec["shrink_s"] = round(time.perf_counter() - t0, 3)

        # the reference at the test's sizes
        torch.manual_seed(0)
        ref = ref_mod.Model(*ref_mod.get_init_inputs())
        torch.manual_seed(1)
        xs = _as_list(ref_mod.get_inputs())
        ref.eval()
        t1 = time.perf_counter()
        want_eval = _run(ref, xs, 2)
        rec["ref_forward_s"] = round(time.perf_counter() - t1, 4)

        rec["candidates"] = {}
        dropins = {}
        for kind in CANDIDATES:
            out = emit.emit(tmp / f"optimized_{kind}.py", candidate_source(source, kind), "Model", "cpu", [xs],
                            f"dropin test ({kind})")
            mod = _load(out, f"_kg_dropin_{kind}_{tag}")
            apply_overrides(mod, overrides)
            assert mod.Model is mod.ModelNew
            torch.manual_seed(0)                    # tensors a constructor makes outside the state_dict alike
            model = mod.Model(*mod.get_init_inputs())
            assert isinstance(model, mod.Model) and mod.Model is mod.ModelNew     # the name is restored after
            model.load_state_dict(ref.state_dict(), strict=True)
            assert list(model.state_dict()) == list(ref.state_dict())
            dropins[kind] = (mod, model)
            rec["candidates"][kind] = {"constructed": True}

        for kind, (mod, model) in dropins.items():  # eval mode, autograd off: the verified mode, the fast path
            model.eval()
            with torch.no_grad():
                assert mod._kg_fast_path_ok(xs, model), f"{kind}: the fast path is not taken in the verified mode"
            calls = mod._dropin_test_calls[0] if kind == "wrapped" else None
            got = _run(model, xs, 2)
            rec["candidates"][kind]["eval_exact"] = compare(got, want_eval, f"{kind} eval")
            if kind == "wrapped":
                assert mod._dropin_test_calls[0] == calls + 1, "the candidate's forward did not run"
        del want_eval

        # training mode: the reference path (outputs, and the buffers it updates)
        ref.train()
        try:
            want_train, train_error = _run(ref, xs, 3), None
        except Exception as e:  # noqa: BLE001 - e.g. batch norm over one value per channel: the drop-in must raise too
            want_train, train_error = None, e
        rec["train_reference_error"] = f"{type(train_error).__name__}: {train_error}"[:200] if train_error else None
        for kind, (mod, model) in dropins.items():
            model.train()
            with torch.no_grad():
                assert not mod._kg_fast_path_ok(xs, model), f"{kind}: the fast path is taken in training mode"
            calls = mod._dropin_test_calls[0] if kind == "wrapped" else None
            if train_error is not None:
                with pytest.raises(type(train_error)):
                    _run(model, xs, 3)
                continue
            got = _run(model, xs, 3)
            rec["candidates"][kind]["train_exact"] = compare(got, want_train, f"{kind} train")
            compare(dict(model.state_dict()), dict(ref.state_dict()), f"{kind} state after a training forward")
            if kind == "wrapped":
                assert mod._dropin_test_calls[0] == calls, "the candidate's forward ran in training mode"
        for kind in CANDIDATES:
            rec["candidates"][kind]["matched"] = True
        rec["outcome"] = "matched"
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        return rec
    finally:
        for name in [n for n in sys.modules if n.startswith("_kg_dropin_") and n.endswith(tag)]:
            del sys.modules[name]
        if rec.get("param_bytes", 0) > 32 << 20:        # free big models now, not at the next full collection
            gc.collect()


PROBLEMS = problems()


@pytest.mark.parametrize("path", PROBLEMS or [None],
                         ids=[f"{p.parent.name}/{p.stem}" for p in PROBLEMS] or ["no-dev-problems"])
def test_dropin_matches_reference(path, tmp_path):
    if path is None:
        pytest.skip(f"{ENV} is not set (or not a directory): no dev problems to check")
    rec = check_problem(path, tmp_path)
    if rec["outcome"] == "skipped":
        pytest.skip(f"{rec['problem']}: {rec['reason']}")
    assert rec["outcome"] == "matched"
