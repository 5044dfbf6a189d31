"""What a fusion is predicted to save, and the hook through which a strategy library says what it fuses.

`fusion_estimate` predicts the time a fusion saves on a machine model: the intermediates it keeps on chip
(each written once and read back `reads` times from DRAM when unfused) at the machine's bandwidth, plus
the launches it removes at the machine's launch overhead. It is an upper bound: an intermediate that
stays in L2 costs less than a DRAM round trip, and launch overhead overlaps with running kernels when the
forward is not launch-bound. `rank_fusions` orders candidate fusions by that prediction; `measured`
records the measured saving next to the prediction for the caller to store.

`whole_forward` is the fusion of the whole forward into one kernel (the `profile` command's estimate).
What each generated-kernel strategy would fuse is strategy knowledge: the strategy library provides it
as a `FusionSource` (proposers/library/fusion_estimates.py) and `strategy_estimates` prices it; this
package never imports the strategies.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..targets import GPU_LAUNCH_S, Machine
from .roofline import _secs, _si


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


#: What a strategy library hands over: (the trusted reference, its inputs) -> the fusion each of its
#: strategies would make, by strategy name (strategies with nothing to fuse left out).
FusionSource = Callable[[torch.nn.Module, Sequence[Any]], dict[str, Fusion]]


def strategy_estimates(source: FusionSource, model: torch.nn.Module, inputs: Sequence[Any],
                       machine: Machine) -> dict[str, FusionEstimate]:
    """Predicted saving on `machine` of each strategy's fusion, as `source` (the strategy library) reports it."""
    return {k: fusion_estimate(f, machine) for k, f in source(model, inputs).items()}
