"""What bounds a forward, in one line with its evidence; and what a fusion is predicted to save.

`classify` combines the roofline floor (roofline.Floor: which term dominates, and how far the measured
forward is from it) with the launch records (launches.Profile: kernels per forward, the share of the
forward with no launch running, tiny kernels, grids smaller than the machine):

- launch-bound:  the device idles between launches for much of the forward (>= LAUNCH_GAP of it) and the
                 forward launches several kernels; graph capture or fusion removes the gaps;
- latency-bound: one launch with the device idle around it, or a busy device far from the floor with
                 kernels too short or too small (fewer blocks than SMs) to fill the machine;
- memory-bound / compute-bound: otherwise, the floor's dominant term; the line says how close the forward is.

`fusion_estimate` predicts the time a fusion saves on a machine model: the intermediates it keeps on chip
(each written once and read back `reads` times from DRAM when unfused) at the machine's bandwidth, plus
the launches it removes at the machine's launch overhead. It is an upper bound: an intermediate that
stays in L2 costs less than a DRAM round trip, and launch overhead overlaps with running kernels when the
forward is not launch-bound. `rank_fusions` orders candidate fusions by that prediction; `measured`
records the measured saving next to the prediction for the caller to store.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .launches import Profile
from .roofline import Floor, _secs, _si
from .targets import GPU_LAUNCH_S, Machine

LAUNCH_GAP = 0.4              # share of the forward between launches from which the forward is launch-bound
LATENCY_FRACTION = 0.1        # a busy forward below this fraction of the floor's rate, with small kernels
SMALL_KERNEL_US = 10.0        # kernels shorter than this are dominated by fixed latency
CLASSES = ("memory", "compute", "launch", "latency", "unknown")


@dataclass(frozen=True)
class Bottleneck:
    kind: str                                  # memory | compute | launch | latency | unknown
    line: str                                  # "launch-bound: 41 kernels, 63% of the forward between launches"
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "evidence": self.evidence}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _count(n: float, what: str) -> str:
    k = f"{n:g}"
    return f"{k} {what}" + ("" if n == 1 else "s")


def classify(floor: Floor | None, profile: Profile | None) -> Bottleneck:
    """memory-, compute-, launch- or latency-bound, with one line of evidence (see the module doc)."""
    ev: dict[str, Any] = {}
    measured_s = profile.forward_median_us * 1e-6 if profile and profile.forwards else None
    fraction = None
    if floor is not None:
        ev.update(floor_s=floor.floor_s, compute_s=floor.compute_s, memory_s=floor.memory_s, floor_bound=floor.bound)
        if measured_s:
            fraction = floor.floor_s / measured_s
            ev.update(measured_s=measured_s, floor_fraction=fraction)
    if profile is not None and profile.forwards:
        unit = "kernel" if profile.kernels_applicable else "op"
        n, gap = profile.kernels_per_forward, profile.gap_share
        ev.update(kernels_per_forward=n, gap_share=gap, forward_us=profile.forward_median_us,
                  tiny_kernels_per_forward=profile.tiny_per_forward)
        between = "between launches" if profile.kernels_applicable else "outside ops (Python and dispatch)"
        if gap >= LAUNCH_GAP and n >= 2:
            return Bottleneck("launch", f"launch-bound: {_count(n, unit)}, {_pct(gap)} of the forward {between}", ev)
        if gap >= LAUNCH_GAP:
            what = f"{_count(n, unit)} of {profile.busy_median_us:.3g} us" if n else f"no {unit}s"
            return Bottleneck("latency", f"latency-bound: {what} in a {profile.forward_median_us:.3g} us forward, "
                                         f"{_pct(gap)} of it waiting on launch and sync", ev)
        if fraction is not None and fraction < LATENCY_FRACTION:
            kernels = [k for k in profile.launches if k.kind in ("kernel", "op")]
            mean_us = statistics.fmean(k.duration_us for k in kernels) if kernels else 0.0
            small = [k for k in kernels if k.blocks is not None and profile.sm_count and k.blocks < profile.sm_count]
            ev.update(mean_kernel_us=mean_us)
            if kernels and (mean_us < SMALL_KERNEL_US or len(small) * 2 >= len(kernels)):
                why = (f"{len(small)} of {len(kernels)} launches with fewer blocks than {profile.sm_count} SMs"
                       if small else f"{unit}s averaging {mean_us:.3g} us")
                return Bottleneck("latency", f"latency-bound: {why}; the forward reaches {_pct(fraction)} of the "
                                             f"roofline floor's rate", ev)
    if floor is None or floor.bound not in ("memory", "compute"):
        return Bottleneck("unknown", "unknown: no roofline floor for this workload on this machine"
                          + ("" if profile else ", and no launch records"), ev)
    share = "" if fraction is None else f"; measured {_secs(measured_s or 0)} = {_pct(fraction)} of the floor"
    if floor.bound == "memory":
        other = f"compute term {_secs(floor.compute_s)}"
        return Bottleneck("memory", f"memory-bound: floor {_secs(floor.floor_s)} is the memory term ({other}) on "
                                    f"{floor.machine}{share}", ev)
    other = f"memory term {_secs(floor.memory_s)}"
    return Bottleneck("compute", f"compute-bound: floor {_secs(floor.floor_s)} is the compute term ({other}) on "
                                 f"{floor.machine}{share}", ev)


# ------------------------------------------------------------------ fusion estimates

@dataclass(frozen=True)
class Fusion:
    """A candidate fusion: what it keeps on chip and how many launches it removes."""

    name: str
    intermediate_bytes: int              # bytes of the tensors the fused kernel no longer writes to memory
    launches_removed: int
    reads: int = 1                       # times each intermediate was read back when unfused


@dataclass(frozen=True)
class FusionEstimate:
    name: str
    bytes_saved: int
    launches_removed: int
    memory_s: float                      # bytes_saved / bandwidth
    launch_s: float                      # launches_removed x launch overhead
    predicted_s: float                   # memory_s + launch_s (an upper bound; see the module doc)
    machine: str
    derivation: str
    measured_s: float | None = None      # measured saving (time before - time after), filled by `measured`
    before_s: float | None = None
    after_s: float | None = None

    @property
    def ratio(self) -> float | None:
        """Measured / predicted saving (None before a measurement)."""
        if self.measured_s is None or self.predicted_s <= 0:
            return None
        return self.measured_s / self.predicted_s

    def measured(self, before_s: float, after_s: float) -> "FusionEstimate":
        """This estimate with the measured saving recorded next to the prediction."""
        return dataclasses.replace(self, measured_s=before_s - after_s, before_s=before_s, after_s=after_s)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ratio"] = self.ratio
        return d


def fusion_estimate(fusion: Fusion, machine: Machine) -> FusionEstimate:
    """Predicted time saved by `fusion` on `machine`: DRAM round trips of its intermediates plus launches."""
    if fusion.intermediate_bytes < 0 or fusion.launches_removed < 0 or fusion.reads < 0:
        raise ValueError(f"fusion '{fusion.name}': bytes, launches and reads must be >= 0")
    moved = fusion.intermediate_bytes * (1 + fusion.reads)
    memory_s = moved / machine.bandwidth if machine.bandwidth else 0.0
    overhead = machine.launch_overhead_s if machine.launch_overhead_s is not None else (
        GPU_LAUNCH_S if machine.kind == "gpu" else 0.0)
    launch_s = fusion.launches_removed * overhead
    bw = f"at {_si(machine.bandwidth, 'B/s')}" if machine.bandwidth else "(no bandwidth known: term omitted)"
    derivation = (f"{_si(fusion.intermediate_bytes, 'B')} of intermediates x (1 write + {fusion.reads} read) = "
                  f"{_si(moved, 'B')} {bw} = {_secs(memory_s)}; {fusion.launches_removed} launches x "
                  f"{_secs(overhead)} = {_secs(launch_s)}; predicted saving {_secs(memory_s + launch_s)} on "
                  f"{machine.name} (upper bound)")
    return FusionEstimate(fusion.name, moved, fusion.launches_removed, memory_s, launch_s, memory_s + launch_s,
                          machine.name, derivation)


def rank_fusions(fusions: Sequence[Fusion], machine: Machine) -> list[FusionEstimate]:
    """Estimates for `fusions`, largest predicted saving first (ties: fewer launches removed, then name)."""
    est = [fusion_estimate(f, machine) for f in fusions]
    return sorted(est, key=lambda e: (-e.predicted_s, e.launches_removed, e.name))


class _Intermediates(TorchDispatchMode):
    """Bytes of every tensor an op produces; which of them a later op reads."""

    def __init__(self) -> None:
        super().__init__()
        self.produced: dict[int, int] = {}
        self.consumers: dict[int, int] = {}
        self.ops = 0
        self.keep: list[torch.Tensor] = []          # keeps ids unique while the forward runs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for t in pytree.tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and id(t) in self.produced:
                self.consumers[id(t)] = self.consumers.get(id(t), 0) + 1
        out = func(*args, **kwargs)
        if not func.is_view:
            self.ops += 1
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.produced[id(t)] = t.numel() * t.element_size()
                    self.keep.append(t)
        return out


def whole_forward(model: torch.nn.Module, inputs: Sequence[Any], kernels_per_forward: float | None = None) -> Fusion:
    """The fusion of a whole forward into one kernel: every op output read by a later op stays on chip.

    Runs `model` (the trusted reference: the judge already runs it) once on meta tensors, else for real.
    Without a measured `kernels_per_forward` (launch records), the non-view ops counted stand in for it."""
    device = next((t.device for t in model.parameters()), torch.device("cpu"))

    def run(meta: bool) -> _Intermediates:
        copies: dict[int, torch.Tensor] = {}

        def conv(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            return copies.setdefault(id(x), x.to("meta" if meta else device))
        named = dict(model.named_parameters()) | dict(model.named_buffers())
        state = {k: conv(v) for k, v in named.items()}
        args = tuple(pytree.tree_map(conv, list(inputs)))
        mode = _Intermediates()
        with torch.no_grad(), mode:
            out = torch.func.functional_call(model, state, args)
        for t in pytree.tree_leaves(out):        # outputs are written once whatever the fusion
            if isinstance(t, torch.Tensor):
                mode.produced.pop(id(t), None)
        return mode
    try:
        mode = run(meta=True)
    except Exception:  # noqa: BLE001 - no meta kernel or data-dependent control flow: count a real run
        mode = run(meta=False)
    inter = [(b, mode.consumers[i]) for i, b in mode.produced.items() if i in mode.consumers]
    nbytes = sum(b for b, _ in inter)
    reads = round(sum(b * r for b, r in inter) / nbytes) if nbytes else 1
    launches = mode.ops if kernels_per_forward is None else kernels_per_forward
    return Fusion("whole forward in one kernel", nbytes, max(0, round(launches) - 1), max(reads, 1))


def _nbytes(node: Any) -> int:
    tm = node.meta.get("tensor_meta") if hasattr(node, "meta") else None
    if tm is None or not hasattr(tm, "shape"):
        return 0
    return int(math.prod(tm.shape)) * tm.dtype.itemsize


def strategy_fusions(model: torch.nn.Module, inputs: Sequence[Any]) -> dict[str, Fusion]:
    """What each generated-kernel strategy would fuse in `model` (the trusted reference), by strategy name.

    Traced as the strategies trace it, shapes propagated on meta tensors: pointwise groups (at least two
    ops) keep their intermediates on chip and launch once; a library GEMM + fused epilogue does that
    for the groups a GEMM feeds; a Triton GEMM with the epilogue in-kernel also keeps the GEMM's output
    on chip and saves its launch. Strategies with nothing to fuse are left out."""
    import copy

    from torch.fx.passes.shape_prop import ShapeProp

    from .proposers.library import triton_fusion as tf
    from .proposers.library.fx_rewrites import kg_trace
    meta = model if all(t.is_meta for t in model.state_dict().values()) else copy.deepcopy(model).to("meta")
    gm = kg_trace(meta)
    ShapeProp(gm).propagate(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs])
    mods, info = tf._kg_tf_info(gm)
    pw = [0, 0, 0]          # intermediate bytes, launches removed, bytes x reads
    epi = [0, 0, 0]
    gemm_out = [0, 0]       # GEMM output bytes kept on chip, GEMM launches folded
    for order in tf._kg_tf_groups(gm, info):
        inner = sum(_nbytes(n) for n in order[:-1])
        reads = sum(_nbytes(n) * len(n.users) for n in order[:-1])
        if len(order) >= 2:
            pw[0], pw[1], pw[2] = pw[0] + inner, pw[1] + len(order) - 1, pw[2] + reads
        feeding = [g for g in tf._kg_tf_inputs(order, info)
                   if tf._kg_tf_gemm_of(g, mods) is not None and all(u in order for u in g.users)]
        if feeding:
            epi[0], epi[1], epi[2] = epi[0] + inner, epi[1] + len(order) - 1, epi[2] + reads
            gemm_out[0] += _nbytes(feeding[0])
            gemm_out[1] += 1
    out: dict[str, Fusion] = {}
    if pw[1]:
        for name in ("triton:pointwise", "cpp:pointwise"):
            out[name] = Fusion(name, pw[0], pw[1], max(1, round(pw[2] / pw[0])) if pw[0] else 1)
    if gemm_out[1]:         # a lone activation after a GEMM with bias: the same two launches, nothing saved
        out["triton:gemm-epilogue"] = Fusion("triton:gemm-epilogue", epi[0], epi[1],
                                             max(1, round(epi[2] / epi[0])) if epi[0] else 1)
    if gemm_out[1]:
        total = epi[0] + gemm_out[0]
        out["triton:gemm"] = Fusion("triton:gemm", total, epi[1] + gemm_out[1],
                                    max(1, round((epi[2] + gemm_out[0]) / total)) if total else 1)
    return out
