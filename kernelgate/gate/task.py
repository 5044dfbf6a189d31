"""The prepared task: a reference loaded, probed, its memory planned and admitted, once per verify, bench or
optimize; every candidate is judged against it (gate/judge.py)."""
from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from .. import hostmem, structure, workload
from ..errors import KernelgateError
from ..oracle import Oracle, own_precision
from ..records import Check, Contract, Reason
from . import admission, checks, timing
from . import memory as memory_mod

log = logging.getLogger(__name__)


def resolve_device(target: str) -> str:
    """Map a target to a torch device; a CUDA target without a GPU is a task error (exit 2)."""
    t = target.lower()
    if t == "cpu":
        return "cpu"
    if t in ("cuda", "gpu") or t.startswith("cuda:") or t in ("h100", "h200", "a100", "l40s", "b200"):
        if not torch.cuda.is_available():
            raise KernelgateError(f"target '{target}' needs a CUDA GPU, and none is visible to PyTorch "
                                  f"(torch {torch.__version__}); use --target cpu", Reason.NO_DEVICE)
        return t if t.startswith("cuda:") else "cuda"
    raise KernelgateError(f"unknown target '{target}': use cpu or cuda")


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform
    from ..sandbox.host import WORKER_THREADS
    return (f"cpu ({platform.processor() or platform.machine()}, {WORKER_THREADS} thread"
            f"{'s' if WORKER_THREADS > 1 else ''} per implementation)")


@dataclass
class Task:
    """A reference ready for judging: loaded, probed, admitted."""

    ref: workload.Reference
    oracle: Oracle
    contract: Contract
    device: str
    target: str
    admission: Check
    given: list[Any]
    out_meta: list[torch.Tensor] = field(default_factory=list)   # task-dtype outputs on the given inputs (meta)
    floor: Any = None                   # roofline.Floor on this device, or None when it cannot be counted
    memory: Any = None                  # memory.Plan: lean or not, and where the judge keeps its data
    admission_s: float = 0.0            # what task admission's trials took: a gate check's trials cost about as much
    shape: Any = None                   # structure.py: how the inputs (the leaves) rebuild the arguments; None: as given
    #: the lean memory plan on a GPU: what moving the given inputs to the host took once (each call the gate judges or
    #: times moves a task's worth through the host: search/policy.least_s); 0.0 where the judge keeps them on the device
    crossing_s: float = 0.0

    @property
    def home(self) -> str:
        """Where the judge keeps inputs, the oracle and the outputs it compares (the device, or the host in
        the lean memory plan)."""
        return self.memory.home if self.memory is not None else self.device

    def inputs(self, seed: int, transform: Callable[[list[Any]], list[Any]] | None = None) -> list[Any]:
        """The workload's inputs under `seed`, where the judge keeps its data (see `inputs_at`)."""
        return inputs_at(self.ref, seed, self.device, self.home, transform, self.shape)

    def args(self, xs: list[Any]) -> list[Any]:
        """The workload's arguments from the gate's inputs (the leaves: structure.py)."""
        return structure.unflatten(xs, self.shape)

    @property
    def lean(self) -> bool:
        return bool(self.memory is not None and self.memory.lean)

    @property
    def quantized(self) -> bool:
        """The reference rounds floats onto an integer grid (requantization), as recorded from its ops."""
        return checks.quantizing(self.oracle.ops)

    @property
    def comparator(self) -> checks.Comparator:
        """How this task's outputs are compared with the oracle (the same for trials, re-checks and admission)."""
        return checks.Comparator.of(self.oracle)

    @property
    def outputs(self) -> checks.Outputs:
        """What every call's outputs must look like (structure, dtype, shape, device, layout, aliasing)."""
        return checks.Outputs(self.oracle.single, self.device, self.contract.strides, self.contract.inplace,
                              tuple(getattr(self.oracle, "shared", ())), tuple(getattr(self.oracle, "conj", ())))

    @property
    def hash(self) -> str:
        return self.ref.hash

    def out_bytes(self) -> int:
        return sum(o.numel() * o.element_size() for o in self.out_meta)


def inputs_at(ref: workload.Reference, seed: int, device: str, home: str,
              transform: Callable[[list[Any]], list[Any]] | None = None, shape: Any = None) -> list[Any]:
    """The workload's inputs under `seed`, generated on the task's device (a CPU generator takes seconds per
    large input: a 16 GiB input took over a minute), flattened into their leaves (`shape`: structure.py),
    `transform`ed there (a trial's distribution: workload.widen) and moved to `home` (the host, in the lean
    memory plan), the device's cached blocks given back."""
    return _placed(_flat(ref.inputs(seed=seed, device=device), shape), device, home, transform)


def _flat(xs: list[Any], shape: Any) -> list[Any]:
    try:
        return structure.flatten(xs, shape)
    except ValueError as e:
        raise KernelgateError(str(e), Reason.TASK_LOAD) from None


def flat_contract(contract: Contract, shape: Any, n_args: int) -> Contract:
    """The contract's input indices (domains, varying dims) as indices of the leaves (structure.py): a
    declaration for an argument holds for each of its leaves."""
    if shape is None:
        return contract
    sp = structure.spans(shape, n_args)
    return replace(contract, domain=tuple((j, d) for i, d in contract.domain for j in sp[i]),
                   vary=tuple(replace(v, inputs=tuple(j for i in v.inputs for j in sp[i])) for v in contract.vary))


def _placed(xs: list[Any], device: str, home: str,
            transform: Callable[[list[Any]], list[Any]] | None = None) -> list[Any]:
    if transform is not None:
        xs = transform(xs)
    if home == device:
        return xs
    xs = [(hostmem.to_host(x) if home == "cpu" else x.to(home)) if isinstance(x, torch.Tensor) else x for x in xs]
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return xs


def prepare(spec: workload.Spec, target: str, contract: Contract, memory: str = "auto") -> Task:
    """Load the reference, measure what its forward needs on the device and plan the gate's memory
    (gate/memory.py), probe it (random? tensors out?), and run task admission."""
    device = resolve_device(target)
    ref = workload.load_reference(spec)
    ref_peak = None
    if device.startswith("cuda"):
        try:
            ref_peak = memory_mod.peak(ref.build(seed=0).to(device), lambda: ref.inputs(seed=0, device=device), device)
        except torch.cuda.OutOfMemoryError as e:
            raise KernelgateError(f"the reference's forward does not fit on {device_name(device)}: {e}",
                                  Reason.TASK_LOAD) from None
    raw = ref.inputs(seed=0, device=device)
    shape = structure.shape_of(raw)            # tensors inside lists, tuples, dicts: the gate sees the leaves
    flat = _flat(raw, shape)
    ins = sum(x.numel() * x.element_size() for x in flat if isinstance(x, torch.Tensor))
    try:
        mplan = memory_mod.plan(device, ref_peak, memory, ins)
    except ValueError as e:
        raise KernelgateError(str(e), Reason.USAGE) from None
    device_home = mplan.home
    for i, _ in contract.domain:
        if i >= len(raw):
            raise KernelgateError(f"contract declares a domain for input {i}, but the workload has {len(raw)} inputs")
    contract = flat_contract(contract, shape, len(raw))
    _no_hidden(raw, shape)
    t_cross = time.monotonic()
    given = _placed(flat, device, device_home)
    crossing_s = time.monotonic() - t_cross if device_home != device else 0.0
    del raw, flat                              # the device's copies (`given` is at home: the host in a lean plan
                                               # without room on the device)
    own = own_precision(Path(spec.path).read_text(), device)         # a kernel implementation on the GPU
    oracle = Oracle(ref, device_home, contract, compute=device, shape=shape, own=own,   # on the device, kept at home
                    lean=mplan.lean)
    # what the outputs look like (dtype, shape, strides), not their values: a forward's worth less held for the
    # task's life (6 GiB of the judge's host memory for the largest dev problems in the lean plan)
    out = [torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device="meta") if isinstance(o, torch.Tensor)
           else o for o in oracle.probe(given)]
    rng = torch.Generator().manual_seed(secrets.randbits(62))

    def trials(home: str):      # one at a time: a trial's inputs and outputs are dropped before the next
        for kind in ("given", "normal", "wide"):
            xs = inputs_at(ref, int(torch.randint(1 << 30, (1,), generator=rng)), device, home,
                           lambda xs, kind=kind: workload.widen(xs, kind, rng, contract), shape)
            runs = oracle.run(xs)
            yield xs, runs
            del xs, runs        # before the next trial's are made (admission dropped its own references)
    t_adm = time.monotonic()
    adm = _admit(oracle, trials, device, device_home)
    if own:
        adm = Check(adm.name, adm.ok, adm.detail + "; oracle: the reference's own run (its kernels take no fp64 on "
                    "the GPU), tolerance its floor with the summation-order term at its cap")
    return Task(ref, oracle, contract, device, target, adm, given, out, _floor(oracle.model, given, device, contract, own),
                mplan, time.monotonic() - t_adm, shape, crossing_s)


def _no_hidden(raw: list[Any], shape: Any) -> None:
    """Refuse inputs holding tensors the gate cannot see as leaves (a function of its own: no loop variable of
    prepare's keeps a device input alive through task admission)."""
    for i, x in enumerate(raw):
        kind = structure.hidden(x) if shape is None or shape[i] is None else next(
            (k for y in structure.flatten([x], [shape[i]]) for k in [structure.hidden(y)] if k), None)
        if kind:
            raise KernelgateError(f"input {i} holds tensors inside a {kind}, which the gate cannot vary: pass them "
                                  "as separate arguments or in a plain list, tuple or dict", Reason.TASK_LOAD)


def _admit(oracle: Oracle, trials: Callable[[str], Any], device: str, home: str) -> Check:
    """Task admission. In the lean memory plan its trials keep their data on the device all the same: the judge
    is the only process of the gate then, and one trial's inputs, runs and mutant stay within the plan's bound
    (about 2.5x the forward at the fp64 run, gate/memory.py); through the host they took 139 s of a 6 GiB task's
    prepare on the H200, every output moved at pageable speeds. Out of device memory, it is done again through
    the host."""
    if home == device or not device.startswith("cuda"):
        return admission.admit(oracle, trials(home))
    oracle.home = device
    try:
        return admission.admit(oracle, trials(device))
    except torch.cuda.OutOfMemoryError:
        log.info("task admission ran out of device memory on the device; again through the host")
    finally:
        oracle.home = home
        torch.cuda.empty_cache()
    return admission.admit(oracle, trials(home))


def _floor(model: torch.nn.Module, given: list[Any], device: str, contract: Contract, own: bool = False):
    """Roofline floor of the workload on this device (None, with a log line, when it cannot be counted)."""
    from .. import targets
    from ..profiling import roofline
    try:
        precision = "tf32" if "tf32" in contract.precision else None
        work = roofline.count(model, given, meta=not own)          # kernels take no meta tensors
        return roofline.floor(work, targets.machine(device), precision)
    except Exception as e:  # noqa: BLE001 - the floor is a signal, never a reason to refuse a task
        log.info("no roofline floor: %s", e)
        return None


def timing_pool(task: Task, n: int, rng: torch.Generator) -> tuple[list[list[Any]], list[Any]]:
    """Input sets for timed loops, from the workload's own generator; how each input is varied per iteration
    (sandbox/loop.fresh): True for floats (scale and noise), [low, high] for floats with a declared domain
    (fresh values inside it: left unvaried, a memo keyed on the pool's entries answered every timed call and
    claimed 6.7x), for integer and bool tensors a fresh draw where the reference accepts one (`resampled`:
    copied, a memo of an integer-only branch claimed 2.79x), False for the rest; then floats and complex drawn
    afresh where the reference accepts it (`drawn_fresh`)."""
    pool = [task.inputs(int(torch.randint(1 << 30, (1,), generator=rng))) for _ in range(n)]
    scalable: list[Any] = []
    for i, x in enumerate(pool[0]):
        d = task.contract.domain_of(i)
        if isinstance(x, (list, tuple)) and any(isinstance(y, torch.Tensor) and (y.is_floating_point() or
                                                                     y.is_complex()) for y in x):
            scalable.append(True)               # a list's float tensors: varied (sandbox/loop._fresh_list)
        elif isinstance(x, torch.Tensor) and x.is_complex():
            scalable.append(True)               # complex: scaled, noise in the real part (red team 24: copied)
        elif not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            scalable.append(False)
        elif d is None or (d.low == float("-inf") and d.high == float("inf")):
            scalable.append(True)
        else:
            scalable.append([float(d.low), float(d.high)])
    for i, mark in resampled(task, pool[0], pool).items():
        scalable[i] = mark
    return pool, scalar_arguments(task, pool, drawn_fresh(task, pool[0], scalable))


def scalar_arguments(task: Task, pool: list[list[Any]], scalable: list[Any]) -> list[Any]:
    """`scalable` with the Python int and float arguments the workload's own draws vary (a sampler's timestep, a
    correlation) drawn every timed iteration as a smoothed bootstrap of the pool's values inside the range they span
    ({"low", "high", "bw"}: `bandwidth`), where nothing else varies them and the reference accepts it (red team 61:
    a memo keyed on a copied timestep claimed 2.70x, one on a correlation the reference refused scaled 4x). Then any
    part of a non-tensor argument (a number, a string, a bool, at any depth of a list, tuple or dict) that the
    pool's entries vary and the timed draws leave as it is makes the run claim nothing (`fixed_inputs`; red team 62:
    a memo keyed on a list of tuples of floats, 2.03x, and on a complex number). An argument the same in every entry
    (a dim, a size, an eps) is copied. The mark is this pool's, every call (the mark of the judge's earlier pool
    left a measurement's entries outside its span, and their draws at its end: a memo of them claimed 2.0-3.1x);
    whether the reference accepts the draws is decided once per task and input."""
    o = task.oracle
    accepted: dict[int, bool] = getattr(o, "scalar_arguments", None) or {}
    nums = [i for i, x in enumerate(pool[0]) if type(x) in (int, float) and scalable[i] is False
            and all(type(xs[i]) is type(x) for xs in pool) and any(xs[i] != x for xs in pool[1:])]
    want = {i: {"low": min(xs[i] for xs in pool), "high": max(xs[i] for xs in pool),
                "bw": bandwidth([float(xs[i]) for xs in pool], 1.0 if type(pool[0][i]) is int else 0.0),
                # values two or more entries hold: the workload's point masses, drawn as they are
                "atoms": sorted({xs[i] for xs in pool if sum(ys[i] == xs[i] for ys in pool) > 1})}
            for i in nums}
    new = [i for i in sorted(want) if i not in accepted]
    if new:
        mark = [want[i] if i in new or accepted.get(i) else ok for i, ok in enumerate(scalable)]
        ok_ = set(_accepted(task, pool[0], mark, new))
        accepted.update({i: i in ok_ for i in new})
    o.scalar_arguments = accepted
    marks = [want[i] if i in want and accepted[i] else ok for i, ok in enumerate(scalable)]
    fixed = {i: f"copied in part ({where})" for i, where in _left_alone(pool, marks).items()}
    if fixed:
        log.info("arguments %s are partly copied into timed iterations though the workload's draws vary them "
                 "(no speedup is claimed): %s", sorted(fixed), fixed)
        _withhold(o, fixed)
    return marks


def _leaves(x: Any, path: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) of a nested list, tuple or dict; anything else is one leaf."""
    if isinstance(x, (list, tuple)):
        return [leaf for j, y in enumerate(x) for leaf in _leaves(y, f"{path}[{j}]")]
    if isinstance(x, dict):
        return [leaf for k, y in x.items() for leaf in _leaves(y, f"{path}[{k!r}]")]
    return [(path, x)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a, b)))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:           # an object without a plain comparison: the same only when it is the same object
        return a is b


#: timed draws compared with the pool's first entry to find the parts of an argument left alone
LEAF_DRAWS = 8


def _left_alone(pool: list[list[Any]], marks: list[Any]) -> dict[int, str]:
    """The non-tensor arguments with a part the pool's entries vary (same structure) that LEAF_DRAWS timed draws
    of the first entry (sandbox/loop.fresh, as the worker makes them) all leave equal to it: {index: its paths}.
    Top-level tensors are drawn_fresh's."""
    out: dict[int, str] = {}
    if len(pool) < 2:
        return out
    idx = [i for i, x in enumerate(pool[0]) if not isinstance(x, torch.Tensor)]
    if not idx:
        return out
    sub = [pool[0][i] for i in idx]
    draws = [timing.fresh(sub, timing.SCALE_RANGE[d % 2], secrets.randbits(62), [marks[i] for i in idx],
                          [0.0] * len(idx), "cpu") for d in range(LEAF_DRAWS)]
    for n, i in enumerate(idx):
        base = _leaves(pool[0][i])
        others = [_leaves(xs[i]) for xs in pool[1:]]
        if any([p for p, _ in o] != [p for p, _ in base] for o in others):
            continue                            # the structure itself varies: no part to compare
        drawn = [_leaves(d[n]) for d in draws]
        paths = [p for k, (p, v) in enumerate(base)
                 if any(not _same(o[k][1], v) for o in others)
                 and all(len(dl) == len(base) and _same(dl[k][1], v) for dl in drawn)]
        if paths:
            out[i] = ", ".join(paths[:4]) + (", ..." if len(paths) > 4 else "") if paths != [""] else "its value"
    return out


def _withhold(o: Any, fixed: dict[int, str]) -> None:
    """Add inputs the timed loop does not draw afresh ({index: how}) to the oracle's record (`fixed_inputs`)."""
    o.fixed_inputs = {**(getattr(o, "fixed_inputs", None) or {}), **fixed}


def fixed_inputs(task: Task) -> str:
    """The inputs a timed iteration does not draw afresh: float inputs no fresh draw or bootstrap the reference
    accepts suits (`drawn_fresh`: the pool entry scaled and noised, scaled, or copied, near what the trials gave)
    and parts of other arguments the workload varies and the timed draws leave alone (`scalar_arguments`), where
    a memo refining or reusing an earlier answer can be exact (red team 59: 1.52x claimed for a solve no faster on new
    inputs). A speedup is then not claimed (timing.speedup's `fixed`); empty where every input is drawn afresh."""
    fixed = getattr(task.oracle, "fixed_inputs", None) or {}
    return ", ".join(f"input {i} {how}" for i, how in sorted(fixed.items()))


#: independent draws the reference must accept before an integer input is redrawn in the timed loop
RESAMPLE_DRAWS = 4

def _accepted(task: Task, xs: list[Any], mark: list[Any], keys: list[int]) -> list[int]:
    """The inputs of `keys` whose timed draws under `mark` (the others drawn as `mark` says too) the reference
    accepts on RESAMPLE_DRAWS draws: all at once, or grown one input at a time (trials.most_accepted)."""
    from .trials import most_accepted, prober
    pr = prober(task)
    like = pr.like(xs, task.oracle.state0)
    dev = [x.to(task.device) if isinstance(x, torch.Tensor) else x for x in xs]
    rms_ = timing.rms(xs, mark)
    for d in range(RESAMPLE_DRAWS):
        if not keys:
            break
        # at the timed scales' two ends in turn (red team 60: at 1.0 a scale-only draw was the entry itself)
        drawn = timing.fresh(dev, timing.SCALE_RANGE[d % 2], secrets.randbits(62), mark, rms_, task.device)
        keys = most_accepted(pr, dev, task.oracle.state0, {i: drawn[i] for i in keys}, like)
        del drawn
    pr.restore()
    return keys


def drawn_fresh(task: Task, xs: list[Any], scalable: list[Any]) -> list[Any]:
    """`scalable` with every float and complex input drawn afresh each timed iteration where the reference accepts
    it: the entry's own values at fresh positions (loop.BOOTSTRAP, the workload's distribution of values), else,
    for real floats, fresh values at the entry's RMS (loop.FRESH), else scaled and noised as before, else scaled
    (loop.SCALE), else copied (logged); Python float arguments scaled and noised where the reference accepts it.
    Timed inputs near earlier ones (a pool entry scaled plus 5% noise) let a memo prove an earlier answer still
    holds wherever a decision in the computation does not move that far: an argmax's (red team 32: 2.28x claimed
    for a candidate no faster on new inputs), a max's or a gather's at one (red team 58: 5.4x), whatever the
    outputs show. Decided once per task, on RESAMPLE_DRAWS draws of the entry (trials.most_accepted: no new
    non-finite outputs), with the integer inputs drawn as `resampled` decided."""
    o = task.oracle
    done = getattr(o, "drawn_fresh", None)
    if done is None:
        done = {}
        boot: dict[int, Any] = {}
        for i, (x, ok) in enumerate(zip(xs, scalable)):
            # one element too (red team 61: a one-element input scaled past where the reference is defined, NaN on
            # most timed calls, which a candidate returned uncomputed)
            if not (isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.numel() >= 1):
                continue
            if ok is True:
                boot[i] = timing.BOOTSTRAP
            elif isinstance(ok, list) and len(ok) == 2:
                boot[i] = [ok[0], ok[1], timing.BOOTSTRAP]
        if boot:
            keys = _accepted(task, xs, [boot.get(i, ok) for i, ok in enumerate(scalable)], sorted(boot))
            done = {i: boot[i] for i in keys}
            rest = [i for i in boot if i not in done and scalable[i] is True and xs[i].is_floating_point()
                    and xs[i].element_size() > 1]
            if rest:
                mark = [done.get(i, timing.FRESH if i in rest else ok) for i, ok in enumerate(scalable)]
                done.update({i: timing.FRESH for i in _accepted(task, xs, mark, rest)})
            left = sorted(set(boot) - set(done))
            fixed = {}
            if left:        # scaled and noised as before, where the reference accepts that (red team 59: NaN there)
                mark = [done.get(i, ok) for i, ok in enumerate(scalable)]
                kept = _accepted(task, xs, mark, left)
                scaled = [i for i in left if i not in kept]
                if scaled:
                    mark = [timing.SCALE if i in scaled else m for i, m in enumerate(mark)]
                    only = _accepted(task, xs, mark, scaled)
                    done.update({i: timing.SCALE if i in only else False for i in scaled})
                fixed = {i: ("moved a quarter of the way into its domain" if isinstance(scalable[i], list) else
                             "scaled and noised") if i in kept else "scaled" if done[i] else "copied" for i in left}
                log.info("inputs %s are not drawn afresh in timed iterations (the reference does not accept it; no "
                         "speedup is claimed): %s", left, ", ".join(f"{i} {how}" for i, how in fixed.items()))
            _withhold(o, fixed)
        # Python float arguments (red team 59: a memo keyed on the pool's four values, 9.1x), and lists holding
        # Python floats or float tensors (red team 61: a tuple of floats was copied, a memo keyed on it 4x)
        floats = [i for i, x in enumerate(xs) if (isinstance(x, (float, complex)) and scalable[i] is False)
                  or (isinstance(x, (list, tuple, dict)) and timing.loop.has_floats(x))]
        if floats:
            mark = [done.get(i, ok) for i, ok in enumerate(scalable)]
            for i in floats:
                mark[i] = True
            kept = _accepted(task, xs, mark, floats)
            done.update({i: True if i in kept else False for i in floats})
        o.drawn_fresh = done
    return [done.get(i, ok) for i, ok in enumerate(scalable)]


def _span(domain: Any, i: int, pool: list[list[Any]]) -> dict[str, Any] | None:
    """The range a timed draw of integer input `i` takes: the span of the workload's own draws (the pool's
    entries), inside the range the trials infer for it (red team 62: lengths drawn over the inferred range, widened
    to every size they could index, left half the sequences empty where the workload's are nearly full, and a
    candidate skipping empty ones claimed 1.67x); the inferred range where the entries hold one value alone (a
    lean task's one entry: it moves, as before), and None where several entries hold one value alone (the
    workload's constant, copied: red team 63's packed batches, every length the same, drawn over the inferred
    range, left half the sequences empty). The mark: {"low", "high", "bw"} (`bandwidth` over the pool's
    values), with "distinct" where every entry's values are distinct (red team 64: a permutation), else "atoms", the
    values every entry holds at a point mass (`_atoms`; red teams 64 and 65: pad ids)."""
    lo = max(int(min(int(xs[i].min()) for xs in pool)), int(domain.low))
    hi = min(int(max(int(xs[i].max()) for xs in pool)), int(domain.high))
    if lo >= hi:
        return None if len(pool) > 1 else {"low": domain.low, "high": domain.high}
    mark: dict[str, Any] = {"low": lo, "high": hi, "bw": bandwidth(torch.cat([xs[i].reshape(-1) for xs in pool]))}
    entries = [xs[i].reshape(-1).long() for xs in pool]
    if all(e.numel() > 1 and torch.unique(e).numel() == e.numel() for e in entries):
        mark["distinct"] = True
    else:
        atoms = set.intersection(*(_atoms(e) for e in entries))
        if atoms:
            mark["atoms"] = sorted(atoms)[:_MAX_ATOMS]
    return mark


#: a value at least this share of an entry's elements, and at least ATOM_LEAST of them, is a point mass of it (a pad
#: id); the jitter leaves one that every pool entry holds so (red team 64: a fifth of the ids; red team 65: packed
#: batches with 1.6-4.7% pad ids beside padded ones, when the share was 5%)
ATOM_SHARE, ATOM_LEAST = 0.01, 8
_MAX_ATOMS = 16


def _atoms(values: torch.Tensor) -> set[int]:
    """The values holding at least ATOM_SHARE of `values`' elements, and ATOM_LEAST of them (two equal draws of
    forty are chance, not a point mass)."""
    u, counts = torch.unique(values, return_counts=True)
    return {int(v) for v in u[(counts >= ATOM_SHARE * values.numel()) & (counts >= ATOM_LEAST)].tolist()}


#: at most this many of an input's values set its bandwidth (a strided subsample of larger ones)
_BW_SAMPLE = 1 << 16


def bandwidth(values: torch.Tensor | list[float], least: float = 1.0) -> float:
    """The jitter (a standard deviation, at least `least`: one for integers) of a smoothed bootstrap of the
    workload's draws: Silverman's rule, 0.9 min(sd, IQR / 1.34) n^(-1/5), with the sd alone where the IQR is 0
    (most values one, a few apart). The timed draws keep the workload's density of values, unlike a uniform draw over their span
    (red team 63: long-tailed lengths), and still take values no entry holds."""
    v = torch.as_tensor(values).reshape(-1).double()
    if v.numel() > _BW_SAMPLE:
        v = v[:: -(-v.numel() // _BW_SAMPLE)]
    n = v.numel()
    if n < 2:
        return least
    q = torch.sort(v).values
    iqr = float(q[(3 * (n - 1)) // 4] - q[(n - 1) // 4])
    sd = float(v.std())
    spread = min(sd, iqr / 1.34) if iqr > 0 else sd
    return max(0.9 * spread * n ** -0.2, least)


def resampled(task: Task, xs: list[Any], pool: list[list[Any]] | None = None) -> dict[int, Any]:
    """How the timed loop draws each integer and bool input again every iteration (sandbox/loop.fresh): as a smoothed
    bootstrap of the entry's values inside the span of the workload's draws, itself inside the range the trials
    infer for it (`_span`, {"low", "high", "bw"}: `bandwidth`), else from its own values (RESAMPLE: bools, inputs
    without an inferred range); only where the reference accepts such a draw (prober.Prober.ok: it runs, no new
    non-finite outputs, no more exact zeros or repeated slices in its outputs than the entry's), all at once or
    grown one input at a time (trials.most_accepted: one refused input leaves the others redrawn). The marks are
    this pool's, every call (`scalar_arguments` says why); whether the reference accepts the draws is decided once
    per task and input: an input it refuses (offsets that must stay sorted) is copied, and logged."""
    o = task.oracle
    accepted: dict[int, bool] = getattr(o, "resampled", None) or {}
    o.resampled = accepted
    ints = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.numel()
            and not x.is_floating_point() and not x.is_complex() and accepted.get(i) is not False]
    if not ints:
        return {}
    from .trials import most_accepted, prober
    pr = prober(task)
    domains = pr.domains()          # inferred once per task
    want = {i: _span(domains[i], i, pool or [xs])
            if i in domains and xs[i].dtype != torch.bool else timing.RESAMPLE for i in ints}
    ints = [i for i in ints if want[i] is not None]
    new = [i for i in ints if i not in accepted]
    if new:
        like = pr.like(xs, o.state0)
        mark = [want[i] if i in new or accepted.get(i) else False for i in range(len(xs))]
        dev = [x.to(task.device) if isinstance(x, torch.Tensor) else x for x in xs]
        keys = new
        for _ in range(RESAMPLE_DRAWS):     # every draw accepted: one lucky draw (sorted offsets) proves nothing
            drawn = timing.fresh(dev, 1.0, secrets.randbits(62), mark, [0.0] * len(xs), task.device)
            keys = most_accepted(pr, dev, o.state0, {i: drawn[i] for i in keys}, like)
            if not keys:
                break
        accepted.update({i: i in keys for i in new})
        refused = [i for i in new if i not in keys]
        if refused:
            log.info("integer inputs %s are copied unvaried into timed iterations: the reference does not accept "
                     "new draws of their values", refused)
            # one the workload's draws vary makes the run claim nothing (red team 63: a kNN graph's edges, whose
            # uniform redraw leaves nodes without edges, copied; a cache of the pool's graphs claimed 2.2x)
            varied = {i: "copied (the reference refuses its redraws)" for i in refused
                      if any(not _same(xs_[i], xs[i]) for xs_ in (pool or [xs]))}
            if varied:
                _withhold(o, varied)
    pr.restore()
    return {i: want[i] for i in ints if accepted[i]}
