"""Compare a candidate's outputs with the fp64 oracle, with a tolerance derived from the reference's own error.

Accept C iff   max|C-G|  <= 2.0 * max(e) + beta * u * max|G|
        and   mean|C-G| <= 1.5 * mean(e) + beta * u * mean|G|
        and   ||C-G||/||G|| <= 2.0 * ||e||/||G|| + beta * u
where e is the largest error of the reference run as permitted (task dtype, and any precision the
reference's configuration or the contract permits) against the oracle G, and u the unit roundoff of
the output format. NaN/Inf positions must match; NaN is never a wildcard.

For an output of a narrow dtype of its own (fp16, bf16, fp8: u >= 2^-11), the mean's and the Frobenius norm's
beta is 1, not 8 (the max keeps 8): rounding to the output is then most of any honest error (on a bf16 linear
layer the reference erred 0.36u on average, honest variants rounding once or twice 0.36-0.49u), and 8 units
let a candidate round every output to 4 mantissa bits (2.9u on average: red team 38, bf16_output_4bit_mantissa)
or its small outputs to fp8's 3 (2.3u).

beta * u is widened by 2 * min(sqrt(K), 32) * min(u, 2^-24), K the longest reduction on that output's path
through the reference (a sum, mean, norm, softmax, loss or matmul/conv over K terms; 0 without one): another
honest summation order (torch.compile's, a blocked kernel's, flash attention's) errs by about sqrt(K) units
of the accumulator's roundoff (fp32 at most) where the reference's own order (pairwise, a tree) happened to
err less: torch.compile's mean over 4096 values erred 1.5e-6 against 4.7e-7 allowed without this term. The
cap keeps lower precision visible: a bf16 GEMM whose errors average out under a mean over 4M values stays
above the bound (red-team case order_bf16_gemm_loss; it passed with a cap of 256); past about a million
terms such averaging hides bf16 (docs/GATE.md, known gaps).

The numbers only: which comparison an output gets (this one, or grid steps for quantized outputs) and the
checks of its metadata are gate/checks.py's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..records import Check

UNIT_ROUNDOFF = {
    torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8,
}
FORMAT_U = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8,
            "fp8e4m3": 2.0 ** -4, "fp8e5m2": 2.0 ** -3}
BETA = 8.0
LOW_BETA, LOW_U = 1.0, 2.0 ** -11        # the mean's and Frobenius norm's floor for fp16/bf16/fp8 outputs
MAX_FACTOR, MEAN_FACTOR = 2.0, 1.5
ORDER_FACTOR, ORDER_CAP = 2.0, 32.0      # the summation-order term: ORDER_FACTOR * min(sqrt(K), ORDER_CAP) * u_acc
ACC_U = 2.0 ** -24                       # the accumulator's roundoff at most (fp32; narrower outputs accumulate in it)
#: a trial's output is ill-conditioned where the task-dtype reference itself errs this many unit roundoffs of the
#: output (relative Frobenius norm): an honest rounding order then lands anywhere in a spread of which the one run
#: is one draw (a linear solve; an exact copy of a float32 solve erred 1.89 against 0.57 allowed in CI, 5.4e-6
#: against 4.6e-6 on a milder trial; a Cholesky solve of a batch the reference erred about 12 units on, 5.64e-6
#: against 5.48e-6), and a refused candidate is judged again on the spread (`spread`)
ILL_UNITS = 4.0
#: on the spread: the factor on the worst of the reference's runs, and that worst capped at SPREAD_CAP times its
#: one run's (moving exactly structured inputs one ulp, two equal columns made unequal, can make a moved run far
#: worse conditioned than the trial: red team 68's ridge fit)
SPREAD_FACTOR, SPREAD_CAP = 4.0, 64.0
#: an output (or a batch's problem) the reference's runs solve no closer than UNDETERMINED (relative Frobenius norm,
#: the worst of its runs, capped) is not determined at the task's precision, and honest algorithms land anywhere
#: near it: an exact copy of a float32 solve of a nearly singular system erred 9x the worst max error of the
#: reference's 5 runs, a Cholesky solve 4.5x LU's. So is one whose exact value moves that far when the inputs move
#: one ulp (LU's runs, alike in their roundings, erred 1% of a system Cholesky erred 123% on). Its bound takes
#: UNDETERMINED_FACTOR on the worst run in place of SPREAD_FACTOR: NaN/Inf positions and magnitudes are still
#: judged (1e30 fails), values hardly
UNDETERMINED, UNDETERMINED_FACTOR = 2.0 ** -4, 64.0


def order_term(u: float, reduce_k: int | None) -> float:
    """The floor's widening for an output whose longest reduction has `reduce_k` terms, output roundoff `u`
    (module docstring); 0 without a reduction."""
    if not reduce_k or reduce_k <= 1:
        return 0.0
    return ORDER_FACTOR * min(math.sqrt(reduce_k), ORDER_CAP) * min(u, ACC_U)


def unit_roundoff(dtype: torch.dtype) -> float:
    if dtype.is_complex:                 # each part's: complex64 is two float32s
        return unit_roundoff(dtype.to_real())
    if dtype in UNIT_ROUNDOFF:
        return UNIT_ROUNDOFF[dtype]
    if dtype.is_floating_point:          # fp8 formats: eps is 2^-(mantissa bits), u half of it
        return torch.finfo(dtype).eps / 2
    return 0.0                           # integers and bool: exact


@dataclass(frozen=True)
class Tolerance:
    """Allowed error for one output, and how it was derived."""

    max_abs: float
    mean_abs: float
    fro_rel: float
    ref_max: float
    ref_mean: float
    ref_fro: float
    u: float
    exact: bool
    source: str                          # which reference run set the error ("task dtype", "tf32 conv", ...)
    own_fro: float = 0.0                 # the task-dtype run's own relative Frobenius error (`ill`)

    @property
    def ill(self) -> bool:
        """The task-dtype reference's own error on this trial is ILL_UNITS or more (a contract's bf16 run erring
        more says nothing of the task's precision: red team 67)."""
        return not self.exact and self.own_fro >= ILL_UNITS * self.u

    def describe(self) -> str:
        if self.exact:
            return "exact (integer/bool output): bit-identical required"
        return (f"max <= {MAX_FACTOR:g}*{self.ref_max:.3g} + beta*u*scale = {self.max_abs:.3g}, "
                f"mean <= {self.mean_abs:.3g} (reference error from {self.source}, u={self.u:.3g})")


#: elements per step of the comparisons over large outputs: each step converts its slice to fp64 and reduces it,
#: so no full-size fp64 copy or temporary is made (6 GiB of fp32 outputs on the host took 27-47 s a trial to
#: compare through full-size temporaries; the same work chunked reads each input once)
CHUNK = 1 << 18                  # on the host: a slice's fp64 temporaries (2 MiB each) stay in the caches
CHUNK_DEVICE = 1 << 24           # on a GPU: fewer launches and synchronisations per slice


def _blocks(shape: tuple[int, ...], step: int):
    """Index tuples that cover a tensor of `shape` in row-major order, in blocks of at most `step` elements (or
    one innermost row, where a row is longer)."""
    if len(shape) <= 1:
        n = shape[0] if shape else 1
        for i in range(0, n, step):
            yield (slice(i, min(i + step, n)),) if shape else ()
        return
    inner = math.prod(shape[1:])
    if inner <= step:
        k = max(1, step // max(inner, 1))
        for i in range(0, shape[0], k):
            yield (slice(i, min(i + k, shape[0])),)
        return
    for i in range(shape[0]):
        for rest in _blocks(shape[1:], step):
            yield (i, *rest)


def _slices(*ts: torch.Tensor, device: str | None = None):
    """The tensors flattened and cut into aligned slices (views where the tensors are contiguous), each moved to
    `device` when given (the lean memory plan keeps outputs on the host and computes on the GPU). A tensor in
    another layout (the layout trials' outputs) is cut by index blocks, each copied on its own: flattening it
    whole would copy it whole (an fp64 oracle of a 6 GiB output: 12 GiB more on the device)."""
    where = device or str(ts[0].device)
    step = CHUNK if where == "cpu" else CHUNK_DEVICE
    if all(t.is_contiguous() for t in ts):
        flat = [t.reshape(-1) for t in ts]
        for i in range(0, flat[0].numel(), step):
            yield tuple(f[i:i + step] if device is None else f[i:i + step].to(device) for f in flat)
        return
    for index in _blocks(tuple(ts[0].shape), step):
        yield tuple(t[index].reshape(-1) if device is None else t[index].reshape(-1).to(device) for t in ts)


def finite_abs_stats(g: torch.Tensor, compute: str | None = None) -> tuple[float, float]:
    """(max, mean) of |g| over its finite elements, (0, 0) without any; chunked, on `compute` when given."""
    mx, total, count = 0.0, 0.0, 0
    for (part,) in _slices(g, device=compute):
        a = part.to(torch.uint8) if part.dtype == torch.bool else part.abs()    # bool has no abs (red team 58)
        s = float(a.sum(dtype=torch.float64))
        if not math.isfinite(s):
            a = a[torch.isfinite(a)]
            s = float(a.sum(dtype=torch.float64))
        if a.numel():
            mx = max(mx, float(a.max()))
            total += s
            count += a.numel()
    return mx, (total / count if count else 0.0)


def mean_nonfinite_as_zero(g: torch.Tensor) -> float:
    """The mean of g with NaN/Inf counted as 0; chunked."""
    if not g.numel():
        return 0.0
    if g.is_complex():              # both parts (a complex output's constant mutant: admission.py)
        return sum(complex(p.to(torch.complex128).nan_to_num(0.0, 0.0, 0.0).sum()) for (p,) in _slices(g)) / g.numel()
    return sum(float(p.to(torch.float64).nan_to_num(0.0, 0.0, 0.0).sum()) for (p,) in _slices(g)) / g.numel()


def _wide(t: torch.Tensor) -> torch.Tensor:
    """t in fp64, or complex128 where it is complex (`.to(torch.float64)` drops the imaginary part)."""
    return t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)


def _all_finite(t: torch.Tensor) -> bool:
    """One reduction instead of a mask: a sum is finite iff every element is (or it overflowed: then the
    caller takes the exact, slower path)."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    return t.numel() == 0 or math.isfinite(float(t.sum(dtype=torch.float64)))


def error_stats(a: torch.Tensor, g: torch.Tensor, compute: str | None = None) -> tuple[float, float, float]:
    """(max, mean, ||a-g||/||g||) over positions where both are finite; chunked (CHUNK), on `compute` when given."""
    if a.numel() <= (CHUNK if a.device.type == "cpu" else CHUNK_DEVICE) and compute is None:
        a64, g64 = _wide(a), _wide(g)
        d = (a64 - g64).abs()
        if not _all_finite(d):                   # non-finite where either side is
            fin = torch.isfinite(d)
            if not bool(fin.any()):
                return 0.0, 0.0, 0.0
            d, g64 = d[fin], g64[fin]
        gn = float(torch.linalg.vector_norm(g64))
        return float(d.max()), float(d.mean()), float(torch.linalg.vector_norm(d)) / gn if gn > 0 else 0.0
    acc = _Errors()
    for ap, gp in _slices(a, g, device=compute):
        acc.add(ap, gp)
    return acc.stats()


class _Errors:
    """error_stats over slices: max, sum, sum of squares of |a-g| and of g, where both are finite."""

    def __init__(self):
        self.mx, self.total, self.sq, self.gsq, self.count = 0.0, 0.0, 0.0, 0.0, 0

    def add(self, ap: torch.Tensor, gp: torch.Tensor) -> None:
        g64 = _wide(gp)
        d = _wide(ap).sub_(g64).abs()
        part = float(d.sum())                    # finite iff every element is (or it overflowed: the exact path)
        if not math.isfinite(part):
            fin = torch.isfinite(d)
            d, g64 = d[fin], g64[fin]
            part = float(d.sum())
        if d.numel():
            self.mx = max(self.mx, float(d.max()))
            self.total += part
            self.sq += float(torch.linalg.vector_norm(d)) ** 2
            self.gsq += float(torch.linalg.vector_norm(g64)) ** 2
            self.count += d.numel()

    def stats(self) -> tuple[float, float, float]:
        if not self.count:
            return 0.0, 0.0, 0.0
        return self.mx, self.total / self.count, math.sqrt(self.sq) / math.sqrt(self.gsq) if self.gsq > 0 else 0.0


def derive(g: torch.Tensor, refs: dict[str, torch.Tensor], out_dtype: torch.dtype, u: float | None = None,
           reduce_k: int | None = None, compute: str | None = None) -> Tolerance:
    """Tolerance for one output from the oracle `g` and the permitted reference runs `refs`; `reduce_k`: the
    longest reduction on this output's path through the reference (order_term); `compute`: where the
    statistics are computed, slice by slice, when not where the tensors are."""
    if not (out_dtype.is_floating_point or out_dtype.is_complex):
        return Tolerance(0, 0, 0, 0, 0, 0, 0.0, True, "exact")
    u = unit_roundoff(out_dtype) if u is None else u
    worst, own = ("", 0.0, 0.0, 0.0), 0.0
    for name, b in refs.items():
        mx, mean, fro = error_stats(b, g, compute)
        if name == "task dtype":
            own = fro
        if mx >= worst[1]:
            worst = (name, mx, max(mean, worst[2]), max(fro, worst[3]))
        else:
            worst = (worst[0], worst[1], max(mean, worst[2]), max(fro, worst[3]))
    name, mx, mean, fro = worst
    scale_max, scale_mean = finite_abs_stats(g, compute)
    floor = BETA * u + order_term(u, reduce_k)
    # a narrow output (fp16, bf16, fp8) of its own dtype: the rounding to it is most of any honest error, so the
    # mean and Frobenius bounds keep one unit above the reference's own (module docstring)
    spread = LOW_BETA * u + order_term(u, reduce_k) if u >= LOW_U and out_dtype.itemsize <= 2 else floor
    return Tolerance(
        max_abs=MAX_FACTOR * mx + floor * scale_max,
        mean_abs=MEAN_FACTOR * mean + spread * scale_mean,
        fro_rel=MAX_FACTOR * fro + spread,
        ref_max=mx, ref_mean=mean, ref_fro=fro, u=u, exact=False, source=name or "task dtype", own_fro=own)


def spread(tol: Tolerance, stats: list[tuple[float, float, float]], sensitivity: float = 0.0) -> Tolerance:
    """`tol` with the reference's own error taken as the worst of its run's and `stats` (max, mean and relative
    Frobenius errors of more runs of the reference, each against the oracle on its own inputs), each capped at
    SPREAD_CAP times the run's, and SPREAD_FACTOR on it in place of the usual factors; UNDETERMINED_FACTOR where
    the worst relative error, or the `sensitivity` (how far the exact output moved, relative Frobenius norm, when
    the inputs moved one ulp), is UNDETERMINED or more. The floors unchanged."""
    worst = [min(max([ref] + [s[i] for s in stats]), SPREAD_CAP * ref)
             for i, ref in enumerate((tol.ref_max, tol.ref_mean, tol.ref_fro))]
    f = UNDETERMINED_FACTOR if max(worst[2], sensitivity) >= UNDETERMINED else SPREAD_FACTOR
    return Tolerance(tol.max_abs + f * worst[0] - MAX_FACTOR * tol.ref_max,
                     tol.mean_abs + f * worst[1] - MEAN_FACTOR * tol.ref_mean,
                     tol.fro_rel + f * worst[2] - MAX_FACTOR * tol.ref_fro, worst[0], worst[1], worst[2],
                     tol.u, tol.exact, "task dtype over runs on inputs moved one ulp" +
                     (" (undetermined at the task's precision)" if f == UNDETERMINED_FACTOR else ""), tol.own_fro)


def compare(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor, tol: Tolerance, label: str,
            compute: str | None = None) -> Check:
    """One output of one trial: positions of non-finite values, then errors against the tolerance; `compute`:
    where the work is done, slice by slice, when not where the tensors are."""
    if tol.exact:
        if c.is_complex() and c.dtype == b.dtype:
            return _exact_complex(c, b.to(c.device), label)
        same = torch.equal(c, b.to(c.device)) if c.dtype == b.dtype else False
        return Check(label, same, "bit-identical" if same else "integer/bool output differs from the reference",)
    if compute is None and c.numel() <= (CHUNK if c.device.type == "cpu" else CHUNK_DEVICE):
        bad = _nonfinite_mismatch(c, g, b, compute)
        if bad:
            return Check(label, False, bad)
        mx, mean, fro = error_stats(c, g, compute)
    else:                # one pass over the slices for both (the lean plan moves each slice to the device once)
        bad, (mx, mean, fro) = _one_pass(c, g, b, compute)
        if bad:
            return Check(label, False, bad)
    detail = f"max err {mx:.3g} (allowed {tol.max_abs:.3g}), mean {mean:.3g} (allowed {tol.mean_abs:.3g})"
    if mx > tol.max_abs or mean > tol.mean_abs or fro > tol.fro_rel or not math.isfinite(mx):
        worst = "max" if mx > tol.max_abs else "mean" if mean > tol.mean_abs else "relative Frobenius"
        return Check(label, False, f"{worst} error too large: {detail}, rel fro {fro:.3g} (allowed {tol.fro_rel:.3g})")
    return Check(label, True, detail)


def _exact_complex(c: torch.Tensor, b: torch.Tensor, label: str) -> Check:
    """A complex output, judged exactly against the reference's `b`: non-finite (either part) at the same
    elements, then each part bit-identical, NaN equal to NaN (torch.equal takes no NaN as equal: an honest
    copy failed wherever the reference's output held one: NaN/Inf inputs, red team 38)."""
    cr, br = torch.view_as_real(c.resolve_conj()), torch.view_as_real(b.resolve_conj())
    cn, bn = ~torch.isfinite(c), ~torch.isfinite(b)
    bad = _nonfinite_message(int((bn & ~cn).sum()), int((cn & ~bn).sum()))
    if bad:
        return Check(label, False, bad)
    same = bool(((cr == br) | (torch.isnan(cr) & torch.isnan(br))).all())
    return Check(label, same, "bit-identical" if same else "complex output differs from the reference (exact)")


def _one_pass(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor,
              compute: str | None) -> tuple[str, tuple[float, float, float]]:
    """`_nonfinite_mismatch` and `error_stats` of a large output in one pass over its slices."""
    acc, counts = _Errors(), [0, 0]
    for cp, gp, bp in _slices(c, g, b, device=compute):
        _count_nonfinite(cp, gp, bp, counts)
        acc.add(cp, gp)
    return _nonfinite_message(*counts), acc.stats()


def _count_nonfinite(cp: torch.Tensor, gp: torch.Tensor, bp: torch.Tensor, counts: list[int]) -> None:
    if _all_finite(cp) and _all_finite(gp):              # summed in fp64 without a converted copy
        return
    m, e = _nonfinite_counts(_wide(cp), _wide(gp), _wide(bp))
    counts[0] += m
    counts[1] += e


def _nonfinite_mismatch(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor, compute: str | None = None) -> str:
    """Where G is non-finite, C must match it exactly; where G is finite, C must be finite
    unless the task-dtype reference itself overflowed there (then C may match B). Chunked (CHUNK)."""
    counts = [0, 0]
    for cp, gp, bp in _slices(c, g, b, device=compute):
        _count_nonfinite(cp, gp, bp, counts)
    return _nonfinite_message(*counts)


def _nonfinite_message(missing: int, extra: int) -> str:
    if missing:
        return f"{missing} NaN/Inf values of the oracle not reproduced"
    if extra:
        return f"{extra} NaN/Inf values where the oracle is finite"
    return ""


def _nonfinite_counts(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(oracle NaN/Inf not reproduced, NaN/Inf where the oracle is finite and B is not the same) of one slice."""
    if _all_finite(c) and _all_finite(g):
        return 0, 0
    parts = c.is_complex()
    if parts:                   # each part judged as a float, an element counted once
        c, g, b = (torch.view_as_real(t.resolve_conj()) for t in (c, g, b))
    missing = (torch.isnan(g) & ~torch.isnan(c)) | (torch.isinf(g) & ~(torch.isinf(c) & (torch.sign(c) == torch.sign(g))))
    extra = ~torch.isfinite(c) & torch.isfinite(g)
    tolerated = extra & ~torch.isfinite(b) & ((torch.isnan(c) & torch.isnan(b)) | (c == b))
    extra = extra & ~tolerated
    if parts:
        missing, extra = missing.any(-1), extra.any(-1)
    return int(missing.sum()), int(extra.sum())


#: in the name of the trial whose inputs hold NaN/Inf (gate/trials.py), judged by `unjudged_where_nonfinite`
NONFINITE_TRIAL = "NaN/Inf inputs"


def unjudged_where_nonfinite(c: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """For the NaN/Inf-input trial: the candidate's output with the oracle's values where the oracle is
    non-finite, so only the rest is judged (as usual: finite and within tolerance).

    How NaN propagates through an op differs between honest implementations (torch.relu keeps a NaN,
    `where(x > 0, x, 0)` and fmaxf-based kernels, Triton's maximum included, turn it into 0), so an output
    the reference makes NaN/Inf from a NaN/Inf input is not judged; a NaN/Inf spreading to outputs the
    reference keeps finite (a global max, a tile shared across rows) is rejected."""
    floats = c.dtype.is_floating_point and g.dtype.is_floating_point
    if not (floats or (c.is_complex() and g.is_complex())) or c.shape != g.shape or c.element_size() < 2:
        return c
    gd = g.to(c.device)
    return torch.where(torch.isfinite(gd), c, gd.to(c.dtype))
