"""Low-precision formats: format facts, an explained tolerance, one-step checks on quantization grids, mutants.

- `explain` records how gate/correctness.py `derive()` set an output's tolerance (it calls derive()).
- Re-quantized outputs (int8, fp8, or floats on a scale grid) are compared in grid steps: two or more steps
  anywhere fail; one-step differences are allowed up to a budget measured on the reference itself by
  perturbing its arithmetic by about one unit roundoff (`one_step_budget`).
- `lowprec_mutants` rewrites a quantizing reference's own ops (lower format, scale dropped, truncation,
  no saturation) so a check is known to reject them. PyTorch's e4m3fn cast saturates on its own (inf and
  values past 448 become 448), so the no-saturation mutant emulates an overflowing cast (NaN; e5m2: inf).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..records import Check
from . import correctness


@dataclass(frozen=True)
class Format:
    """A number format: unit roundoff u = 2^-p (0 for integer formats) and largest finite value."""

    name: str
    dtype: torch.dtype | None
    u: float
    max: float
    exact: bool


FORMATS = {f.name: f for f in (
    Format("fp64", torch.float64, 2.0 ** -53, torch.finfo(torch.float64).max, False),
    Format("fp32", torch.float32, 2.0 ** -24, torch.finfo(torch.float32).max, False),
    Format("tf32", None, 2.0 ** -11, (2 - 2.0 ** -10) * 2.0 ** 127, False),
    Format("fp16", torch.float16, 2.0 ** -11, 65504.0, False),
    Format("bf16", torch.bfloat16, 2.0 ** -8, torch.finfo(torch.bfloat16).max, False),
    Format("fp8e4m3", torch.float8_e4m3fn, 2.0 ** -4, 448.0, False),
    Format("fp8e5m2", torch.float8_e5m2, 2.0 ** -3, 57344.0, False),
    Format("int8", torch.int8, 0.0, 127.0, True),
    Format("uint8", torch.uint8, 0.0, 255.0, True),
    Format("int32", torch.int32, 0.0, 2.0 ** 31 - 1, True),
    Format("int64", torch.int64, 0.0, 2.0 ** 63 - 1, True),
    Format("bool", torch.bool, 0.0, 1.0, True),
)}
_BY_DTYPE = {f.dtype: f for f in FORMATS.values() if f.dtype is not None}
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def classify(dtype: torch.dtype) -> str:
    """Name of the format of `dtype` ("fp32", "bf16", "fp8e4m3", "int8", ...)."""
    if dtype not in _BY_DTYPE:
        raise ValueError(f"no format known for {dtype}")
    return _BY_DTYPE[dtype].name


def _u_text(u: float) -> str:
    """u as a power of two with its decimal value."""
    return "0 (exact)" if u == 0 else f"2^{int(round(math.log2(u)))} = {u:.3g}"


# ------------------------------------------------------------------ the explained tolerance

@dataclass(frozen=True)
class RunError:
    """Error of one permitted reference run against the oracle."""

    run: str
    max: float
    mean: float
    fro: float


@dataclass(frozen=True)
class Derivation:
    """How one output's tolerance was derived, with every number that went into it."""

    output_format: str
    u: float
    formats: tuple[tuple[str, str], ...]     # (role, format): inputs, weights, output
    reduction_length: int | None
    runs: tuple[RunError, ...]               # every permitted run's error against the oracle
    source: str                              # the run whose max error set the bound
    ref_max: float                           # the errors derive() used: max of the source, worst mean and Frobenius
    ref_mean: float
    ref_fro: float
    factor_max: float
    factor_mean: float
    beta: float
    scale_max: float                         # max |G| over finite G
    scale_mean: float
    allowed_max: float
    allowed_mean: float
    allowed_fro: float
    exact: bool                              # bit-identical equality required
    zero_error: bool                         # every permitted run reproduced the oracle exactly on this trial
    reason: str
    order: float = 0.0                       # the floor's summation-order term (correctness.order_term)
    own_fro: float = 0.0                     # the task-dtype run's own relative Frobenius error

    def tolerance(self) -> correctness.Tolerance:
        """The gate's Tolerance record for this derivation."""
        return correctness.Tolerance(self.allowed_max, self.allowed_mean, self.allowed_fro, self.ref_max,
                                     self.ref_mean, self.ref_fro, self.u, self.exact, self.source, self.own_fro)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        d = dataclasses.asdict(self)
        d["formats"] = [{"role": r, "format": f, "u": FORMATS[f].u} for r, f in self.formats]
        return d

    def to_text(self) -> str:
        """Human-readable multi-line explanation."""
        lines = [f"output format {self.output_format}, unit roundoff u = {_u_text(self.u)}"]
        groups: dict[tuple[str, str], list[str]] = {}
        for role, fmt in self.formats:
            groups.setdefault((role.split(" ")[0], fmt), []).append(role.partition(" ")[2] or role)
        for (kind, fmt), names in groups.items():
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            lines.append(f"  {kind} {fmt} (u = {_u_text(FORMATS[fmt].u)}, max {FORMATS[fmt].max:.6g}): {shown}")
        k = self.reduction_length
        lines.append("reduction length: none seen (no sum, norm, softmax, matmul or conv)" if not k else
                     f"reduction length K = {k} (the longest sum, norm, softmax, matmul or conv reduction): "
                     f"another honest summation order errs by about sqrt(K) accumulator roundoffs; order term "
                     f"o = {correctness.ORDER_FACTOR:g} * min(sqrt(K), {correctness.ORDER_CAP:g}) * min(u, 2^-24) = "
                     f"{self.order:.3g}")
        if self.exact:
            grid = self.output_format in _GRID
            return "\n".join(lines + [f"exact: {self.reason}; bit-identical equality required"] + grid * [
                "quantized output: lowprec.check_requant with a one-step budget is the finer check"])
        lines.append("measured reference error against the fp64 oracle:")
        lines += [f"  {r.run}: max {r.max:.4g}, mean {r.mean:.4g}, relative Frobenius {r.fro:.4g}"
                  + ("   <- sets the bound" if r.run == self.source else "") for r in self.runs]
        b, fm, fn, d = self.beta, self.factor_max, self.factor_mean, self
        o = " + o" if self.order else ""
        return "\n".join(lines + [
            f"rule ({d.reason}): factor {fm:g} on max and Frobenius, {fn:g} on mean, floor beta*u, beta = {b:.4g}",
            f"  max|C-G|      <= {fm:g} * {d.ref_max:.4g} + ({b:g} * u{o}) * {d.scale_max:.4g} = {d.allowed_max:.4g}",
            f"  mean|C-G|     <= {fn:g} * {d.ref_mean:.4g} + ({b:g} * u{o}) * {d.scale_mean:.4g} = {d.allowed_mean:.4g}",
            f"  ||C-G||/||G|| <= {fm:g} * {d.ref_fro:.4g} + {b:g} * u{o} = {d.allowed_fro:.4g}"])


_GRID = {"fp8e4m3", "fp8e5m2"} | {f.name for f in FORMATS.values() if f.exact}


def explain(oracle: torch.Tensor, permitted_refs: dict[str, torch.Tensor], out_dtype: torch.dtype, *,
            reduction_length: int | None, factor_max: float = 2.0, factor_mean: float = 1.5,
            beta: float | None = None, formats: Mapping[str, torch.dtype] | None = None) -> Derivation:
    """Derive one output's tolerance (one trial) with correctness.derive() and record how; `reduction_length`:
    the output's longest reduction, as the gate uses it (correctness.order_term)."""
    u = _BY_DTYPE[out_dtype].u if out_dtype.is_floating_point else None   # passed in: the gate's fp8 lookup fails
    tol = correctness.derive(oracle, permitted_refs, out_dtype, u, reduce_k=reduction_length)
    beta = correctness.BETA if beta is None else beta
    order = correctness.order_term(tol.u, reduction_length)
    runs = tuple(RunError(n, *correctness.error_stats(b, oracle)) for n, b in permitted_refs.items())
    g = oracle.to(torch.float64)
    fin = g[torch.isfinite(g)].abs()
    smax, smean = (float(fin.max()), float(fin.mean())) if fin.numel() else (0.0, 0.0)
    zero = bool(runs) and all(r.max == 0.0 for r in runs)
    d = Derivation(classify(out_dtype), tol.u, tuple((r, classify(t)) for r, t in (formats or {}).items())
                   + (("output", classify(out_dtype)),), reduction_length, runs, tol.source, tol.ref_max,
                   tol.ref_mean, tol.ref_fro, factor_max, factor_mean, beta, smax, smean, tol.max_abs,
                   tol.mean_abs, tol.fro_rel, tol.exact, zero, "gate.correctness.derive", order, tol.own_fro)
    if tol.exact or zero:
        why = ("integer/bool output" if tol.exact else "float output the reference reproduced with zero error "
               "(pure data movement or exactly representable results; stands only if so on every trial)")
        return dataclasses.replace(d, exact=True, reason=why)     # derive()'s bounds kept for across_trials
    if (factor_max, factor_mean, beta) != (correctness.MAX_FACTOR, correctness.MEAN_FACTOR, correctness.BETA):
        d = dataclasses.replace(d, allowed_max=factor_max * tol.ref_max + (beta * tol.u + order) * smax,
                                allowed_mean=factor_mean * tol.ref_mean + (beta * tol.u + order) * smean,
                                allowed_fro=factor_max * tol.ref_fro + beta * tol.u + order,
                                reason="gate.correctness.derive, constants replaced")
    return d


def across_trials(derivations: Sequence[Derivation]) -> tuple[Derivation, ...]:
    """Zero-error exactness of a float output stands only if the reference had zero error on every trial."""
    if all(d.zero_error for d in derivations):
        return tuple(derivations)
    return tuple(d if not d.exact or not d.u else dataclasses.replace(
        d, exact=False, reason="gate.correctness.derive (reference error nonzero on another trial)")
        for d in derivations)


def check_output(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor, d: Derivation, label: str = "output") -> Check:
    """Bit-identical to the reference if the derivation is exact, else the gate's comparison under its tolerance."""
    if not d.exact:
        return correctness.compare(c, g, b, d.tolerance(), label)
    cd, bd = (c.double(), b.double()) if c.is_floating_point() else (c, b)
    same = c.dtype == b.dtype and c.shape == b.shape and bool(((cd == bd) | (cd != cd) & (bd != bd)).all())
    return Check(label, same, "bit-identical" if same else "exact output differs from the reference")


def formats_of(model: torch.nn.Module, inputs: Sequence[Any]) -> dict[str, torch.dtype]:
    """Dtypes of the tensor inputs and of the parameters and buffers, by role."""
    out = {f"input {i}": x.dtype for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    out.update({f"weight {n}": t.dtype for n, t in (*model.named_parameters(), *model.named_buffers())})
    return out


class _Rewrite(TorchDispatchMode):
    """Run every op through `fn(name, func, args, kwargs)`; NotImplemented means run the op unchanged."""

    def __init__(self, fn: Callable[[str, Any, tuple, dict], Any]):
        super().__init__()
        self.fn = fn

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = self.fn(func.overloadpacket.__name__, func, args, kwargs or {})
        return func(*args, **(kwargs or {})) if out is NotImplemented else out


def _run(fn: Callable, inputs: Sequence[Any], rewrite: Callable = lambda *a: NotImplemented) -> Any:
    """Call fn(*inputs) without autograd, with its ops rewritten."""
    with torch.no_grad(), _Rewrite(rewrite):
        return fn(*inputs)


# ------------------------------------------------------------------ steps on a quantization grid

@dataclass(frozen=True)
class StepCounts:
    """Elements equal, one grid step apart, two or more apart (non-finite mismatches and off-grid values count as
    two or more), and how many were off the grid."""

    total: int
    equal: int
    one: int
    two_plus: int
    max_steps: int
    off_grid: int = 0

    @property
    def one_fraction(self) -> float:
        return self.one / self.total if self.total else 0.0


def _ordinal(t: torch.Tensor) -> torch.Tensor:
    """Monotone integer index of float values: adjacent representable values differ by 1."""
    w = 8 * t.element_size()
    bits = t.contiguous().view({8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[w]).to(torch.int64)
    mag = bits & ((1 << (w - 1)) - 1)
    return torch.where((bits < 0) | (bits >= (1 << (w - 1))), -mag, mag)


def quant_steps(c: torch.Tensor, ref: torch.Tensor, scale: float | None = None,
                zero_point: float | None = None) -> StepCounts:
    """Grid steps between c and ref: integers (step 1), fp8 or unscaled floats (adjacent values), else `scale`."""
    if c.shape != ref.shape:
        raise ValueError(f"shapes differ: {list(c.shape)} vs {list(ref.shape)}")
    off = torch.zeros(c.shape, dtype=torch.bool)
    if not c.is_floating_point():
        steps = (c.to(torch.int64) - ref.to(torch.int64)).abs()
    else:
        c64, r64 = c.double(), ref.double()
        fin = torch.isfinite(c64) & torch.isfinite(r64)
        far = ~fin & (c64 != r64) & ~(torch.isnan(c64) & torch.isnan(r64))
        if scale is None or c.dtype in FP8:
            steps = (_ordinal(c) - _ordinal(ref.to(c.dtype))).abs()
        else:                                   # dequantized values (q - zero_point) * scale
            q = c64 / scale + (zero_point or 0.0)
            off = fin & ((q - q.round()).abs() > 1e-3)
            far = far | off                     # a value off the grid is no step count at all
            steps = ((c64 - r64) / scale).round().abs().nan_to_num().to(torch.int64)
        steps = torch.where(far, 2, torch.where(fin, steps, 0))
    return StepCounts(c.numel(), int((steps == 0).sum()), int((steps == 1).sum()), int((steps >= 2).sum()),
                      int(steps.max()) if steps.numel() else 0, int(off.sum()))


def check_requant(c: torch.Tensor, ref: torch.Tensor, allowed_one_step_fraction: float, *,
                  scale: float | None = None, zero_point: float | None = None) -> tuple[bool, str]:
    """Two or more steps anywhere fail; one-step differences above the allowed fraction fail."""
    if c.dtype != ref.dtype:
        return False, f"dtype {c.dtype}, expected {ref.dtype}"
    s = quant_steps(c, ref, scale, zero_point)
    msg = (f"{s.equal}/{s.total} equal, {s.one} one step ({s.one_fraction:.3%}, allowed "
           f"{allowed_one_step_fraction:.3%}), {s.two_plus} two or more (max {s.max_steps})")
    if s.off_grid:
        return False, f"{s.off_grid} values off the quantization grid; {msg}"
    return s.two_plus == 0 and s.one_fraction <= allowed_one_step_fraction, msg


# ------------------------------------------------------------------ perturbed and mutated references

MATMULS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "convolution", "_convolution"}
ARITH = MATMULS | {"mul", "div", "add", "sub", "rsub", "addcmul", "addcdiv", "sum", "mean", "exp", "log", "sqrt",
                   "rsqrt", "reciprocal", "pow", "_softmax", "tanh", "sigmoid", "gelu", "silu"}
CLAMPS = {"clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_", "clip", "clip_",
          "hardtanh", "hardtanh_"}
WORKING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SAFETY, FLOOR = 4.0, 1e-3


def _arith(name: str, out: Any) -> bool:
    """A float arithmetic result in a working format (the values the mutations and perturbations touch)."""
    return name in ARITH and isinstance(out, torch.Tensor) and out.dtype in WORKING


def _perturb(seed: int, magnitude: float = 1.0) -> Callable:
    """Matmuls recomputed in fp64 (another accumulation order), each float arithmetic result moved by up to 2u."""
    gen = torch.Generator().manual_seed(seed)

    def fn(name, func, args, kwargs):
        if name not in ARITH or not _arith(name, out := func(*args, **kwargs)):
            return NotImplemented if name not in ARITH else out
        up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        y = func(*up, **kwargs).double() if name in MATMULS else out.double()
        r = torch.rand(out.shape, generator=gen, dtype=torch.float64) * 2 - 1
        return (y * (1 + 2 * magnitude * _BY_DTYPE[out.dtype].u * r)).to(out.dtype)
    return fn


@dataclass(frozen=True)
class Budget:
    """One-step budget: the fraction measured in each perturbed run, the safety factor and floor, the result."""

    fractions: tuple[float, ...]
    two_plus: int
    safety: float
    floor: float
    budget: float


def measure_one_step(reference_fn: Callable, inputs: Sequence[Any], trials: int = 8, *, scale: float | None = None,
                     zero_point: float | None = None, magnitude: float = 1.0, safety: float = SAFETY,
                     floor: float = FLOOR) -> Budget:
    """How often perturbing the reference's own arithmetic by ~u crosses a rounding boundary of its output."""
    ref = _run(reference_fn, inputs)
    counts = [quant_steps(_run(reference_fn, inputs, _perturb(s, magnitude)), ref, scale, zero_point)
              for s in range(trials)]
    fr = tuple(c.one_fraction for c in counts)
    return Budget(fr, sum(c.two_plus for c in counts), safety, floor, max(safety * max(fr), floor))


def one_step_budget(reference_fn: Callable, inputs: Sequence[Any], trials: int = 8, **kw: Any) -> float:
    """Default allowed fraction of one-step differences: SAFETY (4) x the largest measured fraction, >= FLOOR (1e-3)."""
    return measure_one_step(reference_fn, inputs, trials, **kw).budget


def honest_variant(reference_fn: Callable, inputs: Sequence[Any], seed: int = 1000) -> Any:
    """The reference recomputed with another valid accumulation order (fp64 matmuls, ~u perturbations)."""
    return _run(reference_fn, inputs, _perturb(seed))


def _lower(name, func, args, kwargs):
    """Float arithmetic results rounded to the next lower format (fp32/fp64 -> bf16, bf16/fp16 -> e4m3)."""
    if not _arith(name, out := func(*args, **kwargs)):
        return out
    return out.to(torch.float8_e4m3fn if out.element_size() == 2 else torch.bfloat16).to(out.dtype)


def _no_scale(name, func, args, kwargs):
    """Scales dropped: in mul/div, Python-number or broadcast float operands become 1."""
    if name not in ("mul", "div", "mul_", "div_"):
        return NotImplemented
    n = func(*args, **kwargs).numel()
    return func(*[torch.ones_like(a) if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() < n
                  else 1.0 if isinstance(a, float) else a for a in args], **kwargs)


def _truncate(name, func, args, kwargs):
    """Truncation toward zero instead of round-to-nearest-even (round, and casts to narrower floats)."""
    if name in ("round", "round_"):
        return torch.trunc(args[0])
    dt = kwargs.get("dtype")
    if name != "_to_copy" or dt is None or not dt.is_floating_point or not args[0].is_floating_point():
        return NotImplemented
    x, y = args[0], func(*args, **kwargs)
    if dt.itemsize >= x.dtype.itemsize:
        return y
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[dt.itemsize]
    away = torch.isfinite(y.double()) & (y.double().abs() > x.double().abs())
    return torch.where(away, (y.view(ints).to(torch.int64) - 1).to(ints).view(dt), y)   # one value toward zero


def _no_saturation(name, func, args, kwargs):
    """Clamps removed; casts wrap (integers) or overflow (fp8: NaN for e4m3fn, inf for e5m2)."""
    if name in CLAMPS:
        return args[0].clone()
    x, dt = args[0], kwargs.get("dtype")
    if name != "_to_copy" or dt is None or not x.is_floating_point() or dt == torch.bool:
        return NotImplemented
    if not dt.is_floating_point and dt != torch.int64:
        bits, v = 8 * dt.itemsize, torch.nan_to_num(x.double()).trunc().to(torch.int64)
        lo = 0 if dt == torch.uint8 else 1 << (bits - 1)
        return ((v + lo) % (1 << bits) - lo).to(dt)                      # two's-complement wrap-around
    if dt not in FP8:
        return NotImplemented
    f = _BY_DTYPE[dt]
    edge = f.max + 2.0 ** math.floor(math.log2(f.max)) * f.u            # half an ulp above the largest value
    over = torch.copysign(torch.full_like(x, math.nan if dt == torch.float8_e4m3fn else math.inf), x)
    return torch.where(x.abs() >= edge, over, x).to(dt)


MUTATIONS = {"lower format": _lower, "dropped scale": _no_scale, "truncation": _truncate,
             "no saturation": _no_saturation}


def lowprec_mutants(reference_fn: Callable, inputs: Sequence[Any]) -> dict[str, Any]:
    """Outputs of a quantizing reference with its own ops mutated: lower format, scale 1, truncation, no clamp."""
    return {name: _run(reference_fn, inputs, fn) for name, fn in MUTATIONS.items()}
