"""Roofline floors: the work one forward does (FLOPs, bytes that must move) and the least time a machine needs.

`count` runs the reference once (on meta tensors when it can) under torch's FlopCounterMode, which counts
matmul / convolution / attention FLOPs, and under a dispatch mode that adds one FLOP per output element of
pointwise ops and one per input element of reductions and normalisations (reported separately).
`floor` divides by a `targets.Machine`'s peak rates and bandwidth. On a GPU (L2 flushed before every timed
call) every byte is charged at DRAM bandwidth; on a CPU (no flush: inputs are warm) the bytes the caches
can hold may never reach DRAM, so the memory term is max(all bytes at the cores' cache bandwidth, the
bytes beyond the caches at DRAM bandwidth), both upper bounds (`_cpu_memory`).

The compute term describes the reference's algorithm: a correct candidate may do fewer FLOPs (diag(a) @ b
as a broadcast, re-association). Only the memory term (`Floor.safe_s`) binds every correct implementation.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode

from ..targets import Machine, cpu_cache_bandwidth

aten = torch.ops.aten

_DTYPE_NAMES = {torch.float64: "fp64", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
                torch.int8: "int8", torch.uint8: "int8"}
_DTYPE_NAMES.update({getattr(torch, n): "fp8" for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                                         "float8_e5m2fnuz") if hasattr(torch, n)})
# ops that only move or create data: no FLOPs even when tagged pointwise
_MOVES = {aten.clone, aten.copy_, aten._to_copy, aten.fill_, aten.zero_, aten.lift_fresh, aten.detach,
          aten.alias, aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like}
# reductions without torch's reduction tag: one FLOP per input element
_REDUCTIONS = {aten._softmax, aten._log_softmax, aten.cumsum, aten.cumprod, aten.logcumsumexp,
               aten.native_layer_norm, aten.native_batch_norm, aten._native_batch_norm_legit,
               aten._native_batch_norm_legit_no_training, aten.native_group_norm}


def dtype_name(dtype: torch.dtype) -> str:
    """Rate key of a torch dtype: torch.float32 -> "fp32", torch.bfloat16 -> "bf16", ..."""
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@dataclass(frozen=True)
class Work:
    """What one forward does: matmul-class FLOPs (by operand dtype), elementwise FLOPs, and bytes that must move."""

    flops: int                          # matmul / convolution / attention FLOPs (FlopCounterMode)
    elementwise_flops: int              # pointwise: 1 per output element; reductions, norms: 1 per input element
    min_bytes: int                      # input_bytes + param_bytes + output_bytes
    by_dtype: dict[str, float] = field(default_factory=dict, hash=False)       # flops by operand dtype
    conv_by_dtype: dict[str, float] = field(default_factory=dict, hash=False)  # the convolution part of by_dtype
    input_bytes: int = 0                # each input the forward uses, read once
    param_bytes: int = 0                # each parameter and buffer the forward uses, read once
    output_bytes: int = 0               # each output written once
    method: str = "meta"                # how it was counted: "meta", or the device of a real run

    @property
    def total_flops(self) -> int:
        """Matmul-class plus elementwise FLOPs."""
        return self.flops + self.elementwise_flops


@dataclass(frozen=True)
class Floor:
    """Least time for a Work on a Machine: max(compute at peak, bytes at bandwidth), with its derivation."""

    compute_s: float
    memory_s: float
    floor_s: float
    bound: str                          # memory | compute | unknown (no rate and no bandwidth known)
    derivation: str
    machine: str = ""
    precision: str | None = None

    @property
    def safe_s(self) -> float:
        """The part no correct implementation can beat: the memory term (FLOPs can be removed by rewrites)."""
        return self.memory_s

    def to_json(self) -> dict[str, Any]:
        """Its figures in the form results carry (`bench`'s conditions, `optimize`'s result.json)."""
        return {"seconds": self.floor_s, "memory_s": self.memory_s, "compute_s": self.compute_s, "bound": self.bound,
                "machine": self.machine, "precision": self.precision, "derivation": self.derivation}


# ------------------------------------------------------------------ counting

class _Tally(TorchDispatchMode):
    """Elementwise FLOPs, matmul FLOPs by dtype (fed by FlopCounterMode's formulas), and tensors the forward used."""

    def __init__(self) -> None:
        super().__init__()
        self.elementwise = 0
        self.by_dtype: dict[str, float] = defaultdict(float)
        self.conv: dict[str, float] = defaultdict(float)
        self.used: set[int] = set()

    def matmul(self, packet: Any, args: tuple, flops: int) -> None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        name = dtype_name(min(tensors, key=lambda t: t.element_size()).dtype) if tensors else "unattributed"
        self.by_dtype[name] += flops
        if "conv" in packet.__name__:
            self.conv[name] += flops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        for t in leaves:
            self.used.add(id(t))
            if t._base is not None:
                self.used.add(id(t._base))
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if packet not in flop_counter.flop_registry and packet not in _MOVES:
            if torch.Tag.pointwise in func.tags:
                self.elementwise += _first_numel(out)
            elif torch.Tag.reduction in func.tags or packet in _REDUCTIONS:
                self.elementwise += _first_numel(leaves)
        return out


def _first_numel(tree: Any) -> int:
    return next((t.numel() for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)), 0)


def _recording(packet: Any, formula: Callable, tally: _Tally) -> Callable:
    """`formula` (a registry entry: takes the op's raw arguments) that also reports its FLOPs to `tally`."""
    def raw(*args, out_val=None, **kwargs):
        flops = formula(*args, out_val=out_val, **kwargs)
        tally.matmul(packet, args, flops)
        return flops
    raw._get_raw = True
    return raw


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _run(model: torch.nn.Module, inputs: Sequence[Any], meta: bool) -> Work:
    copies: dict[int, torch.Tensor] = {}

    def to_meta(x: Any) -> Any:           # one meta copy per tensor: a tensor passed twice is read once
        if not isinstance(x, torch.Tensor):
            return x
        return copies.setdefault(id(x), x.to("meta"))
    named = dict(model.named_parameters()) | dict(model.named_buffers())    # tied tensors once
    state = {k: to_meta(v) for k, v in named.items()} if meta else named
    args = pytree.tree_map(to_meta, list(inputs)) if meta else list(inputs)
    tally = _Tally()
    counter = flop_counter.FlopCounterMode(display=False, custom_mapping={
        p: _recording(p, f, tally) for p, f in flop_counter.flop_registry.items()})
    with torch.no_grad(), counter, tally:
        out = torch.func.functional_call(model, state, tuple(args)) if meta else model(*args)

    def used_bytes(tensors: list) -> int:
        seen = {id(t): t for t in tensors if isinstance(t, torch.Tensor) and id(t) in tally.used}
        return sum(_nbytes(t) for t in seen.values())
    input_bytes = used_bytes(pytree.tree_leaves(args))
    param_bytes = used_bytes(list({id(t): t for t in state.values()}.values()))
    output_bytes = sum(_nbytes(t) for t in {id(t): t for t in pytree.tree_leaves(out)
                                            if isinstance(t, torch.Tensor)}.values())
    flops = counter.get_total_flops()
    by_dtype, conv = dict(tally.by_dtype), dict(tally.conv)
    tallied = sum(by_dtype.values())
    if tallied and tallied != flops:      # e.g. torch.cond: FlopCounterMode counts the larger branch only
        by_dtype = {k: v * flops / tallied for k, v in by_dtype.items()}
        conv = {k: v * flops / tallied for k, v in conv.items()}
    elif flops and not tallied:
        by_dtype = {"unattributed": float(flops)}
    device = next((t.device.type for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)), "cpu")
    return Work(flops, tally.elementwise, input_bytes + param_bytes + output_bytes, by_dtype, conv,
                input_bytes, param_bytes, output_bytes, "meta" if meta else device)


def count(model: torch.nn.Module, inputs: Sequence[Any], meta: bool = True) -> Work:
    """FLOPs and least bytes of one forward of `model` on `inputs`: a meta run, else a real one. `meta=False`
    for a forward that launches its own kernels (Triton, CUDA C++): handed meta tensors, such a kernel reads
    address 0 and the fault takes the process's CUDA context with it. Its kernels' FLOPs are not counted."""
    if not meta:
        return _run(model, inputs, meta=False)
    try:
        return _run(model, inputs, meta=True)
    except Exception:  # noqa: BLE001 -- no meta kernel, data-dependent control flow, tensors not in the state
        return _run(model, inputs, meta=False)


# ------------------------------------------------------------------ floors

def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _secs(s: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _rate_for(dtype: str, conv: bool, machine: Machine, precision: str | None) -> tuple[str | None, str]:
    """The fastest permitted rate key for matmul-class work in `dtype`, and why it is permitted."""
    keys = {dtype: ""}
    if dtype == "fp32" and precision:
        keys[precision] = f" (precision {precision})"
    elif dtype == "fp32" and conv and machine.kind == "gpu":
        keys["tf32"] = " (cuDNN runs fp32 convolutions in TF32 by default)"
    known = [k for k in keys if machine.rate(k)]
    if not known:
        return None, ""
    best = max(known, key=lambda k: machine.rate(k))
    return best, keys[best]


def floor(work: Work, machine: Machine, precision: str | None = None) -> Floor:
    """Least time for `work` on `machine`: max(FLOPs / peak rate, min_bytes / bandwidth), with the derivation."""
    lines, compute = [], 0.0
    parts = [(d, c, True) for d, c in work.conv_by_dtype.items()]
    parts += [(d, n - work.conv_by_dtype.get(d, 0), False) for d, n in work.by_dtype.items()]
    for dtype, flops, conv in sorted(parts):
        if flops <= 0:
            continue
        what = f"{_si(flops, 'FLOP')} {dtype} {'conv' if conv else 'matmul'}"
        key, why = _rate_for(dtype, conv, machine, precision)
        if key is None:
            lines.append(f"compute: {what}: {machine.name} has no {dtype} rate, term omitted")
            continue
        seconds = flops / machine.rate(key)
        compute += seconds
        lines.append(f"compute: {what} at {key} {_si(machine.rate(key), 'FLOP/s')}{why} "
                     f"[{machine.origin('peak.' + key)}] = {_secs(seconds)}")
    if work.elementwise_flops:
        rate = machine.rate("fp32")
        if rate:
            compute += work.elementwise_flops / rate
            lines.append(f"elementwise: {_si(work.elementwise_flops, 'FLOP')} at fp32 {_si(rate, 'FLOP/s')} "
                         f"[{machine.origin('peak.fp32')}] = {_secs(work.elementwise_flops / rate)}")
        else:
            lines.append(f"elementwise: {_si(work.elementwise_flops, 'FLOP')}: no fp32 rate, term omitted")
    detail = (f"{_si(work.min_bytes, 'B')} (inputs {_si(work.input_bytes, 'B')} + parameters "
              f"{_si(work.param_bytes, 'B')} + outputs {_si(work.output_bytes, 'B')})")
    if machine.kind == "cpu":
        memory = _cpu_memory(work, machine, detail, lines)
    elif machine.bandwidth:
        memory = work.min_bytes / machine.bandwidth
        lines.append(f"memory: {detail} at {_si(machine.bandwidth, 'B/s')} [{machine.origin('bandwidth')}] "
                     f"= {_secs(memory)}")
    else:
        memory = 0.0
        lines.append(f"memory: {detail}: {machine.name} has no bandwidth, term omitted")
    bound = "unknown" if compute == memory == 0 else ("compute" if compute > memory else "memory")
    total = max(compute, memory)
    lines.append(f"floor on {machine.name}: max({_secs(compute)}, {_secs(memory)}) = {_secs(total)}, {bound}-bound")
    return Floor(compute, memory, total, bound, "\n".join(lines), machine.name, precision)


CPU_MEASURED_MARGIN = 1.5     # a calibrated CPU bandwidth is a median copy: streaming stores (no read for
                              # ownership) move the same bytes up to 1.5x faster, so the floor divides by 1.5x it


def _cpu_memory(work: Work, machine: Machine, detail: str, lines: list[str]) -> float:
    """The memory term on a CPU: the CPU timer flushes no cache, so the bytes the caches can hold may never
    reach DRAM; every byte still passes the cores' cache ports. max(all bytes at the cache bandwidth,
    the bytes beyond the caches at DRAM bandwidth), both bandwidths upper bounds."""
    terms = []
    cache_bw = cpu_cache_bandwidth(machine)
    if cache_bw:
        where = machine.origin("cache_bandwidth") if machine.cache_bandwidth else "estimate: cores x clock x 64 B"
        terms.append(work.min_bytes / cache_bw)
        lines.append(f"memory: {detail} through the cores' caches at {_si(cache_bw, 'B/s')} [{where}] "
                     f"= {_secs(terms[-1])}")
    held = machine.cache_bytes or machine.l2_bytes or 0
    spill = max(0, work.min_bytes - held)
    bw, why = machine.bandwidth, ""
    if bw and machine.origin("bandwidth") == "measured":
        bw, why = bw * CPU_MEASURED_MARGIN, (f" (measured {_si(machine.bandwidth, 'B/s')} x {CPU_MEASURED_MARGIN:g} "
                                             "margin: a median copy, which streaming stores beat)")
    if bw:
        terms.append(spill / bw)
        lines.append(f"memory: {_si(spill, 'B')} beyond {_si(held, 'B')} of cache (which may hold the rest: the CPU "
                     f"timer flushes none) from DRAM at {_si(bw, 'B/s')}{why} [{machine.origin('bandwidth')}] "
                     f"= {_secs(terms[-1])}")
    if not terms:
        lines.append(f"memory: {detail}: {machine.name} has no bandwidth and no core count, term omitted")
        return 0.0
    if len(terms) == 2:
        lines.append(f"memory term: max({_secs(terms[0])}, {_secs(terms[1])}) = {_secs(max(terms))}")
    return max(terms)


def fraction(floor_s: float, measured_s: float) -> float:
    """Share of the floor reached: floor / measured (1.0 = at the floor, above 1 = faster than possible)."""
    if floor_s <= 0:
        return 0.0
    return floor_s / measured_s if measured_s > 0 else float("inf")


def below_floor(floor_s: float, measured_s: float, slack: float = 0.9) -> bool:
    """True when `measured_s` is below `slack` x the floor: an impossible time that the gate must reject."""
    return floor_s > 0 and measured_s < slack * floor_s
