"""Records of a profiled forward, shared by the whole profiling package (nothing here imports the rest).

`Launch`: one kernel / copy / memset launched on the device, or (CPU) one top-level ATen op; `Profile`:
the launch records of `forwards` profiled forwards with their wall and busy time and what is derived
from them (kernels per forward, gap share, persistent kernels; launches.py documents how they are
read); `KernelStats`: one row per launched name. `Side` and `Report` are what `kernelgate profile`
returns (api.profile builds them).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

TINY_US = 5.0                             # kernels shorter than this are dominated by fixed per-launch cost


@dataclass(frozen=True)
class Launch:
    """One kernel / copy / memset launched on the device, or (CPU) one top-level op."""

    name: str
    kind: str                             # kernel | memcpy | memset | op
    forward: int                          # index of the profiled forward
    start_us: float                       # from the start of its forward
    duration_us: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None          # per thread
    shared_memory: int | None = None      # bytes per block, static + dynamic
    stream: int | None = None
    occupancy_pct: float | None = None    # CUPTI's estimated achieved occupancy
    persistent: bool = False

    @property
    def blocks(self) -> int | None:
        return math.prod(self.grid) if self.grid else None

    @property
    def threads_per_block(self) -> int | None:
        return math.prod(self.block) if self.block else None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "forward": self.forward,
                             "start_us": round(self.start_us, 3), "duration_us": round(self.duration_us, 3)}
        for key in ("grid", "block", "registers", "shared_memory", "stream", "occupancy_pct"):
            value = getattr(self, key)
            if value is not None:
                d[key] = list(value) if isinstance(value, tuple) else value
        if self.kind == "kernel":
            d["persistent"] = self.persistent
        return d


@dataclass(frozen=True)
class KernelStats:
    """Launches of one kernel name, aggregated over the profiled forwards."""

    name: str
    kind: str
    per_forward: float                    # launches per forward
    total_us: float                       # per forward
    mean_us: float
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    registers: int | None
    shared_memory: int | None
    persistent: bool

    def to_json(self) -> dict[str, Any]:
        d = {"name": self.name, "kind": self.kind, "per_forward": self.per_forward,
             "total_us": round(self.total_us, 3), "mean_us": round(self.mean_us, 3), "persistent": self.persistent}
        for key in ("grid", "block", "registers", "shared_memory"):
            value = getattr(self, key)
            if value is not None:
                d[key] = list(value) if isinstance(value, tuple) else value
        return d


@dataclass(frozen=True)
class Profile:
    """Launch records of `forwards` profiled forwards, with per-forward wall and busy time."""

    device: str
    forwards: int
    launches: tuple[Launch, ...]
    forward_us: tuple[float, ...]         # wall time of each forward (marker span, through the sync)
    busy_us: tuple[float, ...]            # union of device activity (CPU: top-level ops) in each forward
    sm_count: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kernels_applicable(self) -> bool:
        return not self.device.startswith("cpu")

    def _per_forward(self, kinds: tuple[str, ...]) -> float:
        if not self.forwards:
            return 0.0
        counts = [0] * self.forwards
        for launch in self.launches:
            if launch.kind in kinds:
                counts[launch.forward] += 1
        return float(statistics.median(counts))

    @property
    def kernels_per_forward(self) -> float:
        """Median kernel launches per forward (CPU: top-level ops)."""
        return self._per_forward(("kernel",) if self.kernels_applicable else ("op",))

    @property
    def launches_per_forward(self) -> float:
        """Median device launches per forward, copies and memsets included (CPU: top-level ops)."""
        return self._per_forward(("kernel", "memcpy", "memset", "op"))

    @property
    def forward_median_us(self) -> float:
        return float(statistics.median(self.forward_us)) if self.forward_us else 0.0

    @property
    def busy_median_us(self) -> float:
        return float(statistics.median(self.busy_us)) if self.busy_us else 0.0

    @property
    def gap_share(self) -> float:
        """Share of the forwards' wall time in which no launch ran (0..1), over all profiled forwards."""
        wall = sum(self.forward_us)
        return max(0.0, min(1.0, 1.0 - sum(self.busy_us) / wall)) if wall > 0 else 0.0

    @property
    def tiny_per_forward(self) -> float:
        """Kernels per forward shorter than TINY_US."""
        if not self.forwards:
            return 0.0
        n = sum(1 for k in self.launches if k.kind == "kernel" and k.duration_us < TINY_US)
        return n / self.forwards

    def stats(self) -> list[KernelStats]:
        """One row per launched name, busiest first."""
        groups: dict[tuple[str, str], list[Launch]] = {}
        for launch in self.launches:
            groups.setdefault((launch.name, launch.kind), []).append(launch)
        rows = []
        n = max(self.forwards, 1)
        for (name, kind), ls in groups.items():
            total = sum(x.duration_us for x in ls)
            first = ls[0]
            rows.append(KernelStats(name, kind, len(ls) / n, total / n, total / len(ls), first.grid, first.block,
                                    first.registers, first.shared_memory, any(x.persistent for x in ls)))
        return sorted(rows, key=lambda r: -r.total_us)

    def persistent_kernels(self) -> list[str]:
        return sorted({k.name for k in self.launches if k.persistent})

    def summary(self) -> dict[str, Any]:
        return {"device": self.device, "forwards": self.forwards, "kernels_applicable": self.kernels_applicable,
                "kernels_per_forward": self.kernels_per_forward, "launches_per_forward": self.launches_per_forward,
                "forward_us": round(self.forward_median_us, 3), "busy_us": round(self.busy_median_us, 3),
                "gap_share": round(self.gap_share, 4), "tiny_kernels_per_forward": self.tiny_per_forward,
                "persistent_kernels": self.persistent_kernels(), "sm_count": self.sm_count}

    def to_json(self, records: int = 2000) -> dict[str, Any]:
        """Summary, per-name table and the first `records` launch records."""
        return {**self.summary(), "notes": list(self.notes), "table": [s.to_json() for s in self.stats()],
                "records": [x.to_json() for x in self.launches[:records]],
                "records_total": len(self.launches)}


# ------------------------------------------------------------------ the profile command's result

@dataclass(frozen=True)
class Side:
    """The profile of one implementation: launch records, bottleneck line, fingerprint, fusion estimate."""

    label: str
    path: str
    cls: str
    profile: Profile | None = None
    bottleneck: Any = None                # bottleneck.Bottleneck
    fingerprint: Any = None               # fingerprint.Fingerprint
    fusion: Any = None                    # fusion.FusionEstimate (reference only)
    error: str | None = None

    def to_json(self, records: int = 2000) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "class": self.cls, "error": self.error,
                "launches": self.profile.to_json(records) if self.profile else None,
                "bottleneck": self.bottleneck.to_json() if self.bottleneck else None,
                "fingerprint": self.fingerprint.to_json() if self.fingerprint else None,
                "fusion_estimate": self.fusion.to_json() if self.fusion else None}


@dataclass(frozen=True)
class Report:
    """`kernelgate profile`: the reference and optionally a candidate, and the distance of their fingerprints."""

    workload: str
    target: str
    device: str
    machine: str
    floor: Any                            # roofline.Floor or None
    reference: Side
    candidate: Side | None = None
    distance: Any = None                  # fingerprint.Distance

    @property
    def status(self) -> str:
        return "error" if self.candidate is not None and self.candidate.error else "ok"

    @property
    def exit_code(self) -> int:
        return 1 if self.status == "error" else 0

    def to_json(self, records: int = 2000) -> dict[str, Any]:
        f = self.floor
        floor = None if f is None else {"seconds": f.floor_s, "compute_s": f.compute_s, "memory_s": f.memory_s,
                                        "bound": f.bound, "machine": f.machine, "derivation": f.derivation}
        return {"status": self.status, "workload": self.workload, "target": self.target, "device": self.device,
                "machine": self.machine, "floor": floor, "reference": self.reference.to_json(records),
                "candidate": self.candidate.to_json(records) if self.candidate else None,
                "distance": self.distance.to_json() if self.distance else None}
