"""The reference on trial inputs before any candidate sees them (judge-side): whether it accepts a trial's
inputs and parameters (runs, finite outputs), the integer inputs' valid ranges, and whether the NaN/Inf trial
can be judged. Used by the trial plan (trials.py), the layout trials and task admission.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import torch

from .. import workload
from ..oracle import as_list, bit_equal
from ..structure import structured
from . import correctness

log = logging.getLogger(__name__)

#: substrings of ops whose bad index makes a CUDA kernel assert, which ends the judge's CUDA context:
#: on a GPU, probes of a reference with such ops run on a CPU copy of it
INDEXING_OPS = ("index", "gather", "scatter", "embedding", "take", "nll_loss", "one_hot", "bincount",
                "repeat_interleave", "margin", "put", "searchsorted", "bucketize", "histc")
CPU_PROBE_LIMIT_S = 2.0          # a CPU copy slower than this on the given inputs is not used (no risky trials)
SAMPLES = 4                      # draws of the workload's generator from which integer ranges are inferred
NONFINITE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _tensors(xs: list[Any]) -> list[torch.Tensor]:
    return [x for x in xs if isinstance(x, torch.Tensor)]


def _inexact(t: Any) -> bool:
    """A float or complex tensor (a complex element is non-finite where either part is)."""
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _nonfinite(outs: list[Any]) -> list[torch.Tensor | None]:
    """Per output, the mask of non-finite values (None for integer and bool outputs)."""
    return [~torch.isfinite(o) if _inexact(o) else None for o in outs]


def _same_bits(a: Any, b: Any) -> bool:
    """oracle.bit_equal, complex tensors compared as their parts (NaN equal to NaN in either part: bit_equal's
    torch.equal takes no NaN as equal)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_complex() and b.is_complex():
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bit_equal(torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj()))
    return bit_equal(a, b)


#: a timed draw's reference outputs may hold this much larger a share of exact zeros, or of slices along a dim
#: repeating an earlier one, than the workload's own entry (plus 2 elements' or slices' worth): more is work a candidate skips
#: there and not on the workload (red team 62: three boxes in four empty, half the sequences empty)
LIKE_SLACK = 0.1
HASH_CHUNK = 1 << 22             # elements of an output hashed at a time (float64)


def _repeated(t: torch.Tensor, d: int) -> float:
    """The share of t's slices along dim d that repeat an earlier one, compared through a fixed random projection
    (float64, NaN and Inf mapped to finite values), a chunk of slices at a time."""
    moved = t.movedim(d, 0)
    n, width = moved.shape[0], moved[0].numel()
    g = torch.Generator(device="cpu").manual_seed(0)
    v = torch.randn(width, dtype=torch.float64, generator=g).to(t.device)
    step = max(1, HASH_CHUNK // width)
    h = torch.cat([torch.nan_to_num(moved[c:c + step].reshape(-1, width).to(torch.float64), nan=1.5e300,
                                    posinf=1e300, neginf=-1e300).clamp(-1e150, 1e150) @ v
                   for c in range(0, n, step)])
    return 1.0 - torch.unique(h).numel() / n


def shares(outs: list[Any]) -> list[tuple[float, tuple[float, ...], int, tuple[int, ...]] | None]:
    """Per output tensor: (share of exact zeros, per dim the share of slices along it that repeat an earlier one
    (0 where the dim or a slice has one element), elements, shape); None for anything else. Every dim, not the
    first alone (red team 63: a batch of one image's (1, N, HID) box features, three in four the same)."""
    got: list[tuple[float, tuple[float, ...], int, tuple[int, ...]] | None] = []
    for o in outs:
        if not isinstance(o, torch.Tensor) or not o.numel():
            got.append(None)
            continue
        t = torch.view_as_real(o.resolve_conj()) if o.is_complex() else o
        zeros = float((t == 0).sum()) / t.numel()
        dups = tuple(_repeated(t, d) if t.shape[d] > 1 and t.numel() // t.shape[d] > 1 else 0.0
                     for d in range(t.dim()))
        got.append((zeros, dups, t.numel(), tuple(t.shape)))
    return got


def unlike(new: list[Any], base: list[Any]) -> str:
    """Where `new` (shares of a timed draw's outputs) holds more exact zeros or repeated slices along a dim than
    `base` (the workload's entry) by more than LIKE_SLACK; empty when it does not."""
    for k, (a, b) in enumerate(zip(new, base)):
        if a is None or b is None:
            continue
        if a[0] - b[0] > LIKE_SLACK + 2 / a[2]:
            return f"output {k}: {a[0]:.0%} exact zeros against {b[0]:.0%}"
        for d, (x, y) in enumerate(zip(a[1], b[1])):
            if a[3][d] > 1 and x - y > LIKE_SLACK + 2 / a[3][d]:
                return f"output {k}: {x:.0%} repeated slices along dim {d} against {y:.0%}"
    return ""


class Prober:
    """Runs the reference (task dtype) on trial inputs and parameters before any candidate sees them.

    One per task, cached on the oracle; the integer ranges are inferred once."""

    def __init__(self, task: Any):
        self.task, self.oracle = task, task.oracle
        o = self.oracle
        self.loaded: Any = None          # the state dict a probe last loaded into the oracle
        self.risky = o.device.startswith("cuda") and any(s in op for op in o.ops for s in INDEXING_OPS)
        self.cpu: torch.nn.Module | None = None
        self.cpu_loaded: Any = None
        if self.risky:
            self.cpu = self._cpu_copy()
        keys = set(o.state0)
        # the float and complex parameters and buffers the state dict holds: negated and taken far off like
        # parameters (red team 32: running statistics clamped to their init range were accepted when only
        # parameters were; red team 38: complex ones were left out)
        named = [*o.model.named_parameters(remove_duplicate=False), *o.model.named_buffers(remove_duplicate=False)]
        self.params = sorted({k for k, p in named if k in keys and _inexact(p) and p.numel()})
        self.int_buffers = any(not v.is_floating_point() and not v.is_complex() and v.numel() for v in o.state0.values())
        self._domains: dict[int, workload.IntDomain] | None = None
        self._like: tuple[list[Any], list[Any] | None] | None = None    # (the entry, its `shares`): `like`

    def _cpu_copy(self) -> torch.nn.Module | None:
        """The reference on the CPU, for probes that could make a CUDA kernel assert; None when it cannot run
        the given inputs there, or is too slow to."""
        try:
            model = structured(self.task.ref.build(seed=0), self.task.shape)     # called with the leaves
            model.load_state_dict({k: v.cpu() for k, v in self.oracle.state0.items()})
            t0 = time.perf_counter()
            with torch.no_grad():
                model(*[x.cpu() if isinstance(x, torch.Tensor) else x for x in self.task.given])
            if time.perf_counter() - t0 > CPU_PROBE_LIMIT_S:
                log.info("no CPU copy for probing trials: a forward takes %.1f s", time.perf_counter() - t0)
                return None
            return model
        except Exception as e:  # noqa: BLE001 - then risky trials are not tried on this task
            log.info("no CPU copy for probing trials: %s", e)
            return None

    def _load(self, state: dict[str, torch.Tensor]) -> None:
        if self.loaded is not state:
            self.oracle.load(state)
            self.loaded = state

    def run(self, xs: list[Any], state: dict[str, torch.Tensor]) -> list[Any] | None:
        """The reference's task-dtype outputs, or None when it raises (or cannot be run without risk)."""
        dev = None
        try:
            if self.risky:
                if self.cpu is None:
                    return None
                if self.cpu_loaded is not state:
                    self.cpu.load_state_dict({k: v.cpu() for k, v in state.items()})
                    self.cpu_loaded = state
                dev, model = [x.cpu() if isinstance(x, torch.Tensor) else x for x in xs], self.cpu
            else:
                self._load(state)
                dev = [x.to(self.oracle.device) if isinstance(x, torch.Tensor) else x for x in xs]
                model = self.oracle.model
            with torch.no_grad():
                return [o.detach() if isinstance(o, torch.Tensor) else o for o in as_list(model(*dev))]
        except Exception:  # noqa: BLE001 - a rejected trial
            return None
        finally:
            dev = None                  # the inputs on the device: this frame's reference goes before the give-back
            self._give_back()

    def _give_back(self) -> None:       # the lean memory plan: the device's cached blocks go back
        getattr(self.oracle, "give_back", lambda: None)()

    def ok(self, xs: list[Any], state: dict[str, torch.Tensor],
           base: tuple[list[Any], dict[str, torch.Tensor]] | None = None, like: list[Any] | None = None) -> bool:
        """The reference accepts `xs` under `state`: it runs, and its outputs are finite, or non-finite only
        where they are on `base` (the same trial without the change); with `like` (`shares` of the workload's
        entry), a timed draw's outputs also hold no more exact zeros or repeated slices than it (`unlike`)."""
        outs = self.run(xs, state)
        if outs is None:
            return False
        if like is not None:
            why = unlike(shares(outs), like)
            if why:
                log.debug("a timed draw refused: %s", why)
                del outs
                self._give_back()
                return False
        masks = _nonfinite(outs)
        del outs                      # the masks only: a probe holds one run's outputs at a time
        self._give_back()
        if not any(m is not None and bool(m.any()) for m in masks):
            return True
        if base is None:
            return False
        before = self.run(*base)
        if before is None:
            return False
        before_masks = _nonfinite(before)
        del before
        self._give_back()
        for m, b in zip(masks, before_masks):
            if m is None or not bool(m.any()):
                continue
            if b is None or b.shape != m.shape or bool((m & ~b).any()):
                return False
        return True

    def like(self, xs: list[Any], state: dict[str, torch.Tensor]) -> list[Any] | None:
        """`shares` of the reference's outputs on the workload's entry `xs` (kept for the same list object), the
        yardstick of timed draws; None when it does not run."""
        kept = self._like
        if kept is None or kept[0] is not xs:
            outs = self.run(xs, state)
            kept = (xs, None if outs is None else shares(outs))
            del outs
            self._give_back()
            self._like = kept
        return kept[1]

    def domains(self) -> dict[int, workload.IntDomain]:
        """Valid ranges of the integer and bool inputs (inferred once per task; empty when there are none)."""
        if self._domains is None:
            self._domains = {}
            given = self.task.given
            ints = [i for i, x in enumerate(given) if isinstance(x, torch.Tensor) and x.numel()
                    and not x.is_floating_point() and not x.is_complex()]
            if ints:
                samples = [self.task.inputs(s) for s in range(SAMPLES)]
                state0 = self.oracle.state0
                if self.ok(samples[0], state0):
                    sizes = workload.integer_sizes(samples[0], self.oracle.model, self.task.ref.init_inputs)
                    g = torch.Generator().manual_seed(0)     # the ranges are the workload's, not secret
                    for i in ints:
                        d = workload.infer_int_domain(i, samples, sizes, lambda xs: self.ok(xs, state0), g)
                        if d is not None:
                            self._domains[i] = d
        return self._domains

    def nonfinite_ok(self, xs: list[Any], state: dict[str, torch.Tensor], clean: list[Any] | None = None) -> bool:
        """Keep the NaN/Inf trial only where the reference defines its outputs there in a way the oracle can
        judge: it runs; the task-dtype run and the oracle agree on where outputs are NaN, +Inf, -Inf (an output
        non-finite everywhere is judged so: checks.Expected.check); a second run after poisoning the allocator
        gives the same bits; and where both are finite, the task-dtype run is as close to the oracle as on `clean`
        (the same inputs without the special values), within 10x its tolerance there (no uninitialised
        memory or dtype-dependent value behind a NaN)."""
        if self.risky and self.run(xs, state) is None:
            return False
        if getattr(self.oracle, "own", False):   # no second opinion: a kernel's NaN handling is its accident
            return False                         # (Triton's maximum drops NaN, torch.relu keeps it)
        # the lean plan's runs stay on the device (no worker holds anything while trials are made): 27 s a probe
        # of a 6 GiB task through the host on the H200
        with getattr(self.oracle, "on_device", contextlib.nullcontext)():
            return self._nonfinite_ok(xs, state, clean)

    def _nonfinite_ok(self, xs: list[Any], state: dict[str, torch.Tensor], clean: list[Any] | None) -> bool:
        try:
            self._load(state)
            tols = None
            if clean is not None:   # first, its figures only kept: one pair of runs held at a time (a task's worth)
                base = self.oracle.run(clean)
                tols = [correctness.derive(g0, {"task dtype": b0}, b0.dtype) if b0.dtype in NONFINITE_DTYPES else None
                        for g0, b0 in zip(base.oracle, base.task)]
                del base
            runs = self.oracle.run(xs)
            for b in runs.task:                          # the next allocations of these sizes hold a pattern
                if _inexact(b):
                    torch.full_like(b, 1234.5, device=self.oracle.device)
            dev = [x.to(self.oracle.device) if isinstance(x, torch.Tensor) else x for x in xs]
            with torch.no_grad():      # compared where the runs are kept (the host in the lean memory plan)
                again = [self.oracle.homed(o) if isinstance(o, torch.Tensor) else o
                         for o in as_list(self.oracle.model(*dev))]
            del dev
            self._give_back()           # the inputs' and the pattern's blocks (the lean memory plan)
        except Exception:  # noqa: BLE001
            return False
        for g, b, b2 in zip(runs.oracle, runs.task, again):
            if not all(isinstance(t, torch.Tensor) for t in (g, b, b2)) or g.shape != b.shape or not _same_bits(b, b2):
                return False
            if b.is_complex():           # judged exactly against `b` (the same twice): the oracle non-finite alike
                if not (g.is_complex() and torch.equal(~torch.isfinite(g), ~torch.isfinite(b).to(g.device))):
                    return False
                continue
            if not all(t.dtype in NONFINITE_DTYPES for t in (g, b, b2)):
                continue                 # an integer output beside float ones (an argmax): the same twice
            gi, bi = torch.isinf(g), torch.isinf(b)
            if not torch.equal(torch.isnan(g), torch.isnan(b)) or not torch.equal(gi, bi) \
                    or not torch.equal(torch.sign(g[gi]), torch.sign(b[bi]).to(g.dtype)):
                return False
        for g, b, tol in zip(runs.oracle, runs.task, tols or ()):
            if tol is None:
                continue
            mx, mean, _ = correctness.error_stats(b, g)
            if mx > 10 * tol.max_abs or mean > 10 * tol.mean_abs:
                return False
        return True

    def restore(self) -> None:
        """Put the oracle back to the initial parameters (as the judge expects it between candidates)."""
        if self.loaded is not None:
            self.oracle.reset()
        self.loaded = None


def prober(task: Any) -> Prober:
    o = task.oracle
    p = getattr(o, "trial_prober", None)
    if not isinstance(p, Prober) or p.task is not task:
        p = Prober(task)
        o.trial_prober = p
    p.loaded = None                  # the judge loads other parameters between plans
    return p
