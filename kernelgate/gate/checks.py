"""How the gate judges what a call returned: one comparator and one output-metadata check.

Every judgement of outputs goes through here: the correctness trials and the timed-loop re-checks
(gate/session.py, in verify and in every measurement of bench and optimize) and task admission's mutants
(gate/admission.py), so a mutant is rejected exactly when a candidate returning the same values would be.

- `Comparator`: per output, the tolerance of docs/GATE.md derived once from the oracle G, the task-dtype run
  B and the permitted runs (gate/correctness.py); outputs on a quantization grid (fp8, and integer outputs
  of a reference that rounds floats onto a grid) are judged in grid steps instead (gate/lowprec.py).
  A candidate's output of another dtype or shape than B's is never compared (no broadcasting).
- `Outputs`: structure, dtype, shape, device, layout and aliasing of one call's outputs, as the worker
  describes them (every trial and every timed iteration) and as the tensors reach the judge (trials and
  re-check fetches).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from .. import moves
from ..oracle import QUANTIZING_OPS
from ..records import Check, Reason
from ..sandbox.loop import rms
from . import correctness, lowprec
from .trials import FAMILY, FAR, LAYOUT

def quantizing(ops: Any) -> bool:
    """Whether a reference with these recorded ops rounds floats onto an integer grid (requantization)."""
    return any(op in ops for op in QUANTIZING_OPS)


# ------------------------------------------------------------------ values

@dataclass(frozen=True)
class Expected:
    """One output of one run as the gate judges it: built once from the oracle's runs, applied to any
    candidate or mutant output. `tol` for float and exact outputs; `grid` (on the host) for quantized ones."""

    g: torch.Tensor                              # the fp64 oracle
    b: torch.Tensor                              # the reference in the task's dtype
    tol: correctness.Tolerance | None = None
    grid: torch.Tensor | None = None             # the oracle, or B where the oracle is steps away from B's grid
    one_step: float = 0.0                        # allowed share of one-step differences on the grid
    compute: str | None = None                   # where comparisons run when not where g is (lean plan: the GPU)

    def check(self, c: torch.Tensor, label: str, nonfinite_inputs: bool = False) -> Check:
        """Candidate output `c` against the oracle, on the oracle's device. `nonfinite_inputs`: the trial put
        NaN/Inf into the inputs, so outputs the reference makes non-finite are not judged
        (correctness.unjudged_where_nonfinite)."""
        b = self.b
        if type(c) is not torch.Tensor or c.dtype != b.dtype or c.shape != b.shape:
            got = f"{c.dtype} {list(c.shape)}" if isinstance(c, torch.Tensor) else type(c).__name__
            return Check(label, False, f"output is {got}, expected {b.dtype} {list(b.shape)}")
        if nonfinite_inputs and not (b.dtype.is_floating_point or b.dtype.is_complex):
            # an integer output beside float ones (an argmax) on NaN/Inf inputs: which index a NaN wins differs
            # between honest implementations, as NaN propagation does (correctness.unjudged_where_nonfinite)
            return Check(label, True, "integer output not judged on NaN/Inf inputs")
        if self.grid is not None:
            ok, msg = lowprec.check_requant(c.cpu(), self.grid, self.one_step)
            return Check(label, ok, f"quantized output: {msg}" if ok else f"quantized output off the oracle: {msg}")
        if nonfinite_inputs:
            if self.g.numel() and (b.dtype.is_floating_point or b.dtype.is_complex) and \
                    not bool(torch.isfinite(self.g).any()):
                # non-finite everywhere (a loss, a norm over everything): so must the candidate's be (red team 35:
                # a loss that drops its non-finite terms hides a diverged run behind a plausible number)
                bad = int(torch.isfinite(c).sum())
                return Check(label, bad == 0, "non-finite everywhere, as the reference's" if bad == 0 else
                             f"finite at {bad} of {c.numel()} positions where the reference's output is non-finite "
                             "everywhere (its NaN/Inf inputs reach every output): non-finite inputs were dropped")
            c = correctness.unjudged_where_nonfinite(c, self.g)
        if not _on(c, self.compute):             # else already where the comparison runs (the lean plan's GPU)
            c = c.to(self.g.device)
        return correctness.compare(c, self.g, b, self.tol, label, self.compute)


#: at most this many problems of a batch are judged one by one (Comparator.each_problem); past it, runs of them
EACH_MAX = 4096


def hides_a_problem(tol: correctness.Tolerance | None, c: Any, xs: list[Any]) -> bool:
    """Whether an output's bound is loose enough that one of its problems, cut in the most problems any way
    Oracle.separable tries (moves.problems), could be off by correctness.UNDETERMINED of itself or more within it
    (relative Frobenius bound times the square root of that count): only then is a batch judged problem by
    problem (gate/session.py `each_problem`). A bound loose everywhere alike (a TF32 convolution's, 1e-3 of a
    64-image batch) is not: a wiped image fails it."""
    if tol is None or not isinstance(c, torch.Tensor) or c.numel() < 2:
        return False
    n = max((n for n, _ in moves.problems(tuple(c.shape), xs)), default=1)
    return tol.fro_rel * math.sqrt(n) >= correctness.UNDETERMINED


#: the float bounds in a layout trial, the far-off parameters trial and an input family's, times the normal ones
LAYOUT_SLACK = 2.0


def for_trial(e: Expected, name: str, given: correctness.Tolerance | None, ratio: float) -> Expected:
    """One output's expectation as the trial `name` changes it. An input family's bound is no lower than trial 1's
    (`given`) times `ratio` (the family's input scale over trial 1's, at most 1): where alike entries cancel (one
    repeated row centred over the batch) the exact output is 0 and the reference's own error is its lucky rounding
    (an honest torch.compile erred 1.5x the doubled bound); its grid share is free (alike entries' ties to the
    rounding grid are not independent; two steps still refused). The float bounds are doubled (LAYOUT_SLACK) in
    another layout (a compiler picks another reduction for strided reads: an honest torch.compile erred 1.4x the
    bound), under parameters scaled 4-8x, where an honest reformulation's error grows with the conditioning
    (softmax as exp(y - logsumexp(y)) after a LayerNorm erred 1.0x the bound, 1 verify in 6), and in a family,
    where the reference's own error is atypically small (a mean over repeated values is nearly exact)."""
    if FAMILY in name:
        if given is not None and e.tol is not None and not e.tol.exact:
            e = replace(e, tol=replace(e.tol, max_abs=max(e.tol.max_abs, ratio * given.max_abs),
                                       mean_abs=max(e.tol.mean_abs, ratio * given.mean_abs)))
        if e.grid is not None:
            e = replace(e, one_step=1.0)
    if (LAYOUT in name or FAR in name or FAMILY in name) and e.tol is not None and not e.tol.exact:
        e = replace(e, tol=replace(e.tol, max_abs=LAYOUT_SLACK * e.tol.max_abs, mean_abs=LAYOUT_SLACK * e.tol.mean_abs,
                                   fro_rel=LAYOUT_SLACK * e.tol.fro_rel))
    return e


def input_scale(xs: list[Any]) -> float:
    """The RMS of the float inputs together (the scale of a trial's inputs), from timing.rms's per-input figures."""
    floats = [isinstance(x, torch.Tensor) and x.is_floating_point() for x in xs]
    sizes = [x.numel() if f else 0 for x, f in zip(xs, floats)]
    n = sum(sizes)
    return (sum(r * r * k for r, k in zip(rms(xs, floats), sizes)) / n) ** 0.5 if n else 0.0


def _on(t: torch.Tensor, device: str | None) -> bool:
    """`t` is on `device` ("cuda" names whichever GPU is current)."""
    if device is None:
        return False
    d = torch.device(device)
    return t.device.type == d.type and (d.index is None or t.device.index == d.index)


@dataclass(frozen=True)
class Comparator:
    """The comparison of docs/GATE.md (Tolerance; quantized outputs) for one task.

    Outputs on a quantization grid (fp8, or integer outputs with a rounding op on their own way: an argmax
    beside a rounded output is judged exactly) are judged in grid steps: two or more steps fail anywhere;
    one-step differences may not exceed the contract's `one_step` share, by default max(0.1%, twice the
    reference's own rate)."""

    quantized: bool = False                      # the reference rounds floats onto an integer grid
    one_step: float | None = None                # the contract's allowed one-step share, if declared
    reduce_ks: tuple[int, ...] = ()              # each output's longest reduction (correctness.order_term)
    compute: str | None = None                   # the oracle's compute device where it keeps data elsewhere
    rounded: tuple[bool, ...] | None = None      # per output: rounded on its way (None: not recorded, any output)

    @classmethod
    def of(cls, oracle: Any) -> "Comparator":
        home, device = getattr(oracle, "home", None), getattr(oracle, "device", None)
        rounded = getattr(oracle, "rounded", None)
        return cls(quantizing(oracle.ops), oracle.contract.one_step, tuple(getattr(oracle, "reduce_ks", ()) or ()),
                   device if home is not None and device != home else None,
                   tuple(rounded) if rounded else None)

    def on_grid(self, g: torch.Tensor, b: torch.Tensor, k: int = 0) -> bool:
        """Output `k` is judged in grid steps: fp8, or an integer output of a quantizing reference with a
        rounding op on its own way."""
        own = self.rounded is None or (k < len(self.rounded) and self.rounded[k])
        return b.dtype in lowprec.FP8 or (self.quantized and own and not b.dtype.is_floating_point
                                          and b.dtype != torch.bool and g.dtype == b.dtype)

    def expect(self, g: torch.Tensor, b: torch.Tensor, permitted: dict[str, torch.Tensor], k: int = 0) -> Expected:
        """Output `k`: oracle `g`, task-dtype run `b`, the permitted reference runs."""
        if self.on_grid(g, b, k):
            own = lowprec.quant_steps(b.cpu(), g.cpu())
            allowed = self.one_step if self.one_step is not None else max(lowprec.FLOOR, 2 * own.one_fraction)
            target = b if own.two_plus else g        # an oracle steps away from the reference is no grid reference
            return Expected(g, b, grid=target.cpu(), one_step=allowed)
        reduce_k = self.reduce_ks[k] if k < len(self.reduce_ks) else 0     # 0: not recorded (no widening)
        return Expected(g, b, tol=correctness.derive(g, permitted, b.dtype, reduce_k=reduce_k, compute=self.compute),
                        compute=self.compute)

    def each_problem(self, c: torch.Tensor, runs: Any, more: list[Any], k: int, label: str,
                     view: Any = None) -> Check:
        """Output `k` of a batch of independent problems (Oracle.separable: `view` takes the output to one row per
        problem; by default its first dimension), judged problem by problem on the spread of the reference's runs
        on that problem alone (`runs` and the `more` runs on inputs moved one ulp: correctness.spread). One
        system's error excuses no other's (red team 67: the one nearly singular system of 64 set the whole
        output's bound, and the healthy 63 were wiped). A problem the reference's runs solve no closer than
        correctness.UNDETERMINED, or whose exact solution moves that far when the inputs move one ulp, stays
        judged by the whole output's bound alone: its values are not determined at the task's precision (an
        honest Cholesky solve erred 0.68 of a nearly singular system's solution where LU's runs erred at most
        0.16, and 1.23 of one they erred 1% on). Past EACH_MAX problems, runs of neighbouring problems are judged
        together (0.24 ms a problem on the CPU)."""
        if not isinstance(c, torch.Tensor) or c.shape != runs.task[k].shape:
            return Check(label, False, f"output is not {list(runs.task[k].shape)}")
        v = view or (lambda t: t)                # the output as one row per problem (Oracle.separable)
        g, b, c = v(runs.oracle[k]), v(runs.task[k]), v(c)
        permitted = {name: v(r[k]) for name, r in runs.permitted.items()}
        moved = [(v(r.task[k]), v(r.oracle[k])) for r in more]
        n = b.shape[0]
        step = -(-n // EACH_MAX)                 # a very large batch: runs of neighbouring problems judged together
        bad: list[Check] = []
        for i in range(0, n, step):
            p = slice(i, i + step)
            e = self.expect(g[p], b[p], {name: r[p] for name, r in permitted.items()}, k)
            if e.tol is None or e.tol.exact:
                continue
            sensitivity = max((correctness.error_stats(mo[p], g[p], e.compute)[2] for _, mo in moved), default=0.0)
            tol = correctness.spread(e.tol, [correctness.error_stats(mt[p], mo[p], e.compute) for mt, mo in moved],
                                     sensitivity)
            if max(tol.ref_fro, sensitivity) >= correctness.UNDETERMINED:
                continue                # not determined at the task's precision: left to the whole output's bound
            chk = replace(e, tol=tol).check(c[p], label)
            if not chk.ok:
                which = f"problem {i}" if step == 1 else f"problems {i}-{min(i + step, n) - 1}"
                bad.append(replace(chk, detail=f"{which}: {chk.detail}"))
        if bad:
            return replace(bad[0], detail=f"{len(bad)} of the batch's {n} problems"
                                          f"{'' if step == 1 else f' (in runs of {step})'} outside their own "
                                          f"spread; {bad[0].detail}")
        return Check(label, True, f"each well-conditioned problem of the batch's {n} within its own spread")

    def expected(self, runs: Any) -> list[Expected]:
        """Every output of one run of the oracle (oracle.Runs)."""
        return [self.expect(g, b, {n: r[k] for n, r in runs.permitted.items()}, k)
                for k, (g, b) in enumerate(zip(runs.oracle, runs.task))]


# ------------------------------------------------------------------ metadata

@dataclass(frozen=True)
class Problem:
    """A failed output-metadata check: its reason, the check's name and what was wrong."""

    reason: Reason
    check: str
    detail: str


@dataclass(frozen=True)
class Outputs:
    """What every call's outputs must look like: the reference's structure (one tensor or a sequence), and per
    output the reference's dtype, shape and device, a layout `layout_ok` allows (unless the contract relaxes
    strides), no memory shared with an input (unless the contract declares inplace)."""

    single: bool
    device: str
    strides: bool = True
    inplace: bool = False
    shared: tuple[bool, ...] = ()       # per output: shares memory with an earlier output in the reference's
    conj: tuple[bool, ...] = ()         # per output: the reference's is a conjugate view (torch.conj)

    def described(self, single: Any, metas: Any, refs: list[torch.Tensor], name: str) -> Problem | None:
        """The worker's description of one call's outputs against the reference's outputs on the same shapes."""
        n = len(refs)
        if single != self.single or not isinstance(metas, list) or len(metas) != n \
                or not all(isinstance(m, dict) for m in metas):
            want = "one tensor" if self.single else f"a sequence of {n} tensors"
            got = ("one tensor" if single is True else f"a sequence of {len(metas)} tensors"
                   if isinstance(metas, list) and single is False else "something else")
            return Problem(Reason.OUTPUT_TYPE, "output structure", f"returned {got}, expected {want} ({name})")
        for k, (meta, b) in enumerate(zip(metas, refs)):
            label = f"output {k}" if n > 1 else "output"
            if not {"dtype", "shape", "stride", "device", "aliased"} <= set(meta):
                return Problem(Reason.OUTPUT_TYPE, "output structure", f"{label}: incomplete description ({name})")
            bad = check_meta(meta, b, self.device, self.strides, label)
            if bad:
                return Problem(bad[0], "output dtype/shape/device/strides", f"{bad[1]} ({name})")
            if meta.get("aliased") and not self.inplace:
                return Problem(Reason.ALIASING, "no aliasing", f"{label} shares memory with an input ({name}); "
                               "declare inplace = true in the contract if intended")
            if meta.get("conj") and not (k < len(self.conj) and self.conj[k]):
                # red team 38: the right values as a conjugate view of memory holding their conjugates; a caller's
                # kernel reading the pointer (data_ptr) reads every imaginary part negated
                return Problem(Reason.OUTPUT_TYPE, "output type", f"{label} is a conjugate-bit view (its memory holds "
                               f"the conjugates), which the reference's is not ({name})")
            shares = meta.get("shares")
            if shares is not None and not (k < len(self.shared) and self.shared[k]):
                # red team 32: `return y, y` for the reference's `y, y.clone()`: a caller's in-place edit of one
                # output changes the other
                return Problem(Reason.ALIASING, "no aliasing", f"{label} shares memory with output {shares}, "
                               f"which the reference's outputs do not ({name})")
        return None

    def kind(self, tensors: Any, name: str) -> Problem | None:
        """The outputs that reached the judge are a list of plain tensors."""
        if not isinstance(tensors, list) or any(type(c) is not torch.Tensor for c in tensors):
            return Problem(Reason.OUTPUT_TYPE, "output type", f"the output is not made of plain tensors ({name})")
        return None

    def handed(self, tensors: Any, refs: list[torch.Tensor], name: str) -> Problem | None:
        """The tensors themselves, as they reached the judge (a trial's outputs, a re-check's fetch): plain
        tensors, as many as the reference returns, each of the reference's dtype and shape (whatever the
        worker described)."""
        bad = self.kind(tensors, name)
        if bad:
            return bad
        if len(tensors) != len(refs):
            return Problem(Reason.OUTPUT_TYPE, "output structure", f"{len(tensors)} tensors for {len(refs)} "
                           f"outputs ({name})")
        for k, (c, b) in enumerate(zip(tensors, refs)):
            bad = _dtype_shape(str(c.dtype), list(c.shape), b, f"output {k}" if len(refs) > 1 else "output")
            if bad:
                return Problem(bad[0], "output dtype/shape/device/strides", f"{bad[1]} ({name})")
        return None


def _dtype_shape(dtype: Any, shape: Any, ref: torch.Tensor, label: str) -> tuple[Reason, str] | None:
    if dtype != str(ref.dtype):
        return Reason.DTYPE, f"{label}: dtype {dtype}, expected {ref.dtype}"
    if list(shape) != list(ref.shape):
        return Reason.SHAPE, f"{label}: shape {shape}, expected {list(ref.shape)}"
    return None


def check_meta(meta: dict, ref: torch.Tensor, device: str, strides: bool, label: str) -> tuple[Reason, str] | None:
    """Exact dtype, shape and device of one output; its layout by `layout_ok` (unless strides are relaxed)."""
    bad = _dtype_shape(meta["dtype"], meta["shape"], ref, label)
    if bad:
        return bad
    want = torch.device(device)
    got = torch.device(meta["device"])
    if got.type != want.type:
        return Reason.DEVICE, f"{label}: on {got}, expected {want.type}"
    if strides and not layout_ok(list(meta["shape"]), list(meta["stride"]), list(ref.stride())):
        return Reason.STRIDE, (f"{label}: strides {meta['stride']}, expected {list(ref.stride())} or row-major "
                               "(contract: strides=false relaxes)")
    return None


def layout_ok(shape: list[int], stride: list[int], ref_stride: list[int]) -> bool:
    """The layout rule (dimensions of size 1 never matter):
    - the reference's strides exactly, or
    - row-major contiguous: what `.contiguous()` of the reference's output would give, on which `.view` of
      any compatible shape and row-major pointer arithmetic work, or
    - when the reference's own output is not contiguous (a view, a slice), the same layout padded: the same
      order of dimensions by stride, the same innermost stride, no overlap, any pitch (a padded buffer
      sliced to the valid region). Code consuming a non-contiguous output already goes through strides.
    Anything else (column-major for a row-major reference, a padded slice where the reference is
    contiguous) is refused: `.view` would raise, or a kernel reading the pointer row-major would read padding."""
    if math.prod(shape) <= 1 or _same_strides(shape, stride, ref_stride) or _contiguous(shape, stride):
        return True
    if _contiguous(shape, ref_stride):
        return False
    dims = [d for d, n in enumerate(shape) if n > 1]
    order = sorted(dims, key=lambda d: (stride[d], d))
    ref_order = sorted(dims, key=lambda d: (ref_stride[d], d))
    return (order == ref_order and stride[order[0]] == ref_stride[order[0]] and _dense_enough(shape, stride, order)
            and _dense_enough(shape, ref_stride, ref_order))


def _contiguous(shape: list[int], stride: list[int]) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n == 0:
            return True
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def _dense_enough(shape: list[int], stride: list[int], order: list[int]) -> bool:
    """No two elements share memory: along `order` (innermost first), each stride clears the span inside it."""
    span = 1
    for d in order:
        if stride[d] < span:
            return False
        span = stride[d] * shape[d]
    return True


def _same_strides(shape: list[int], a: list[int], b: list[int]) -> bool:
    if math.prod(shape) <= 1:
        return True
    return all(x == y for n, x, y in zip(shape, a, b) if n > 1)
