"""What bounds a forward, in one line with its evidence.

`classify` combines the roofline floor (roofline.Floor: which term dominates, and how far the measured
forward is from it) with the launch records (records.Profile: kernels per forward, the share of the
forward with no launch running, tiny kernels, grids smaller than the machine):

- launch-bound:  the device idles between launches for much of the forward (>= LAUNCH_GAP of it) and the
                 forward launches several kernels; graph capture or fusion removes the gaps;
- latency-bound: one launch with the device idle around it, or a busy device far from the floor with
                 kernels too short or too small (fewer blocks than SMs) to fill the machine;
- memory-bound / compute-bound: otherwise, the floor's dominant term; the line says how close the forward is.

What a fusion is predicted to save is in fusion.py.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from .records import Profile
from .roofline import Floor, _secs

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


#: a forward whose call sites' launch cost is this many times its roofline floor is expected launch-bound
EXPECT_LAUNCH_OVER_FLOOR = 2.0
#: and that has at least this many call sites (one launch behind one op is latency, not launches)
EXPECT_LAUNCH_MIN_OPS = 8


def expected(floor: Floor | None, call_sites: int, launch_s: float | None) -> str:
    """The bottleneck a forward is expected to have before any profile: "launch" where its ops' launches (the
    graph's call sites times the machine's launch cost) take EXPECT_LAUNCH_OVER_FLOOR times its roofline floor or
    more, else "" (nothing expected). A deep network of small kernels (ResNet-101's 345 call sites against a 0.32 ms
    floor on an H100: 76% of eager's forward between launches, measured) then tries graph capture first, instead of
    finding out after its baselines have taken most of the budget."""
    if floor is None or not launch_s or call_sites < EXPECT_LAUNCH_MIN_OPS or floor.floor_s <= 0:
        return ""
    return "launch" if call_sites * launch_s >= EXPECT_LAUNCH_OVER_FLOOR * floor.floor_s else ""
