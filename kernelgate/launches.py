"""Launch records: what one forward launches, read from torch.profiler's own trace.

The model runs in its worker (`worker.Harness.op_profile`): a few warm-up forwards, then `forwards`
forwards under torch.profiler, each inside a `record_function` marker that ends after a device-wide
sync. The worker exports the chrome trace and ships back only plain event dicts (name, category, start,
duration, a whitelist of args); everything here parses that untrusted data in the judge.

On CUDA every kernel, memcpy and memset is one `Launch` with what CUPTI recorded for it: grid, block,
registers per thread, shared memory (kineto reports static + dynamic as one number), stream and duration.
Derived per forward: kernel count, the share of the forward's wall time in which the device ran nothing
(`gap_share`: launch latency, host work, syncs), and persistent kernels (at most one block per SM yet
running long, so each block must loop over the work).

On the CPU there are no kernels: the records are the top-level ATen ops of each forward (name, duration),
and `gap_share` is the share of the forward spent outside them (Python and dispatch overhead).

The profiler itself adds a few microseconds per launch on the host, so `gap_share` is an upper bound of
what an unprofiled forward loses; durations of device work are unaffected.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

MARKER = "kernelgate.forward"             # record_function name prefix; ".<i>" is the forward's index
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")   # lower-cased; older kineto: Memcpy
CUDA_CATEGORIES = ("user_annotation",) + DEVICE_CATEGORIES
CPU_CATEGORIES = ("user_annotation", "cpu_op")
ARGS = ("grid", "block", "registers per thread", "shared memory", "stream", "device", "correlation", "bytes",
        "est. achieved occupancy %")
KIND_OF = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "memcpy": "memcpy", "memset": "memset",
           "cpu_op": "op"}
PERSISTENT_MIN_US = 50.0                  # a kernel with <= one block per SM running this long loops inside
TINY_US = 5.0                             # kernels shorter than this are dominated by fixed per-launch cost
MAX_EVENTS = 200_000                      # events a worker may ship back
MAX_NAME = 1000                           # characters of a name kept


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


# ------------------------------------------------------------------ parsing untrusted trace events

def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _int(x: Any) -> int | None:
    v = _num(x)
    return int(v) if v is not None and v >= 0 else None


def _dim3(x: Any) -> tuple[int, int, int] | None:
    if isinstance(x, (list, tuple)) and 1 <= len(x) <= 3:
        dims = [_int(v) for v in x]
        if all(d is not None for d in dims):
            padded = [int(d) for d in dims if d is not None] + [1] * (3 - len(dims))
            return (padded[0], padded[1], padded[2])
    return None


@dataclass(frozen=True)
class _Event:
    name: str
    cat: str
    ts: float
    dur: float
    tid: Any
    args: dict[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _clean(events: Iterable[Any]) -> list[_Event]:
    out = []
    for e in events:
        if not isinstance(e, dict):
            continue
        name, cat, ts, dur = e.get("name"), e.get("cat"), _num(e.get("ts")), _num(e.get("dur"))
        if not isinstance(name, str) or not isinstance(cat, str) or ts is None or dur is None or dur < 0:
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        tid = e.get("tid") if isinstance(e.get("tid"), (int, str)) else None
        out.append(_Event(name[:MAX_NAME], cat.lower(), ts, dur, tid, args))
    return out


def _markers(events: list[_Event]) -> list[_Event]:
    """The forward markers, in forward order (one per index; the first seen wins)."""
    found: dict[int, _Event] = {}
    for e in events:
        if e.cat == "user_annotation" and e.name.startswith(MARKER + "."):
            suffix = e.name[len(MARKER) + 1:]
            if suffix.isdigit():
                found.setdefault(int(suffix), e)
    return [found[i] for i in sorted(found)]


def _union_us(intervals: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def parse(events: Sequence[Any], device: str, sm_count: int | None = None) -> Profile:
    """Launch records from trace events (the dicts `op_profile` returns). Raises ValueError without markers."""
    evs = _clean(events)
    marks = _markers(evs)
    if not marks:
        raise ValueError(f"the trace holds no '{MARKER}.<i>' markers: the profiler recorded no forward")
    cpu = device.startswith("cpu")
    launches: list[Launch] = []
    walls: list[float] = []
    busy: list[float] = []
    notes: list[str] = []
    if cpu:
        notes.append("CPU target: kernel launch records (grid, block, registers, shared memory, stream) are not "
                     "applicable; the records are the top-level ATen ops of each forward")
        for i, m in enumerate(marks):
            ops = sorted((e for e in evs if e.cat == "cpu_op" and e.tid == m.tid and e.ts >= m.ts and e.end <= m.end),
                         key=lambda e: (e.ts, -e.dur))
            top, end = [], -math.inf
            for e in ops:
                if e.ts >= end:               # not nested in the previous top-level op
                    top.append(e)
                    end = e.end
            launches += [Launch(e.name, "op", i, e.ts - m.ts, e.dur) for e in top]
            walls.append(m.dur)
            busy.append(_union_us([(e.ts, e.end) for e in top]))
        return Profile(device, len(marks), tuple(launches), tuple(walls), tuple(busy), sm_count, tuple(notes))
    device_events = sorted((e for e in evs if e.cat in DEVICE_CATEGORIES), key=lambda e: e.ts)
    # The worker syncs the device before the first marker and inside each marker, so device work of forward i
    # starts before marker i + 1; the first window is open to the left against host/device clock skew.
    for i, m in enumerate(marks):
        start = m.ts if i else -math.inf
        stop = marks[i + 1].ts if i + 1 < len(marks) else math.inf
        mine = [e for e in device_events if start <= e.ts < stop]
        end = max([m.end] + [e.end for e in mine])
        walls.append(end - m.ts)
        busy.append(_union_us([(max(e.ts, m.ts), max(e.end, m.ts)) for e in mine]))
        for e in mine:
            launches.append(_launch(e, i, m.ts, sm_count))
    if not any(x.kind == "kernel" for x in launches):
        notes.append("no kernels were recorded in the profiled forwards (CUPTI unavailable, or the forward "
                     "launched nothing)")
    return Profile(device, len(marks), tuple(launches), tuple(walls), tuple(busy), sm_count, tuple(notes))


def _launch(e: _Event, forward: int, t0: float, sm_count: int | None) -> Launch:
    a = e.args
    kind = KIND_OF.get(e.cat, e.cat)
    grid, block = _dim3(a.get("grid")), _dim3(a.get("block"))
    blocks = math.prod(grid) if grid else None
    persistent = (kind == "kernel" and sm_count is not None and blocks is not None and 0 < blocks <= sm_count
                  and e.dur >= PERSISTENT_MIN_US)
    return Launch(e.name, kind, forward, e.ts - t0, e.dur, grid, block, _int(a.get("registers per thread")),
                  _int(a.get("shared memory")), _int(a.get("stream")), _num(a.get("est. achieved occupancy %")),
                  persistent)


# ------------------------------------------------------------------ driving a worker

def request(device: str, inputs: list[Any], warmup: int, forwards: int, artifacts: bool) -> dict[str, Any]:
    """The `profile` message for a worker."""
    return {"op": "profile", "inputs": inputs, "warmup": warmup, "iters": forwards, "marker": MARKER,
            "categories": list(CPU_CATEGORIES if device.startswith("cpu") else CUDA_CATEGORIES),
            "args": list(ARGS), "max_events": MAX_EVENTS, "artifacts": artifacts}


def profile_session(session: Any, inputs: list[Any], *, warmup: int = 3, forwards: int = 5,
                    artifacts: bool = True, baseline: bool = False) -> tuple[Profile, list[dict[str, Any]]]:
    """Build `session`'s model in its worker, profile it there, and parse the reply here.

    `session` is a `gate.judge.Session` (its worker runs the model; this process only reads the data).
    Returns the launch records and the compiled-kernel artifacts the worker found (fingerprint.py)."""
    session.build(baseline=baseline)
    return profile_live(session, inputs, warmup=warmup, forwards=forwards, artifacts=artifacts)


def profile_live(session: Any, inputs: list[Any], *, warmup: int = 3, forwards: int = 5,
                 artifacts: bool = True) -> tuple[Profile, list[dict[str, Any]]]:
    """Profile the model `session`'s worker has already built (the search's accepted candidates)."""
    from . import targets
    task = session.task
    timeout = session.cfg.call_timeout * (warmup + forwards) + session.cfg.build_timeout
    reply = session.request(request(task.device, inputs, warmup, forwards, artifacts), timeout, "profile")
    sm_count = None
    if not task.device.startswith("cpu"):
        sm_count = targets.machine(task.device).sm_count or _sm_from_trace(reply.get("device_properties"))
    events = reply.get("events")
    if not isinstance(events, list):
        raise ValueError("the worker returned no trace events")
    prof = parse(events, task.device, sm_count)
    if reply.get("truncated"):
        prof = Profile(prof.device, prof.forwards, prof.launches, prof.forward_us, prof.busy_us, prof.sm_count,
                       prof.notes + (f"the trace was cut at {MAX_EVENTS} events",))
    arts = reply.get("artifacts")
    return prof, [a for a in arts if isinstance(a, dict)] if isinstance(arts, list) else []


def _sm_from_trace(props: Any) -> int | None:
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and _int(p.get("numSms")):
                return _int(p.get("numSms"))
    return None


# ------------------------------------------------------------------ the profile command

@dataclass(frozen=True)
class Side:
    """The profile of one implementation: launch records, bottleneck line, fingerprint, fusion estimate."""

    label: str
    path: str
    cls: str
    profile: Profile | None = None
    bottleneck: Any = None                # bottleneck.Bottleneck
    fingerprint: Any = None               # fingerprint.Fingerprint
    fusion: Any = None                    # bottleneck.FusionEstimate (reference only)
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


def _side(task: Any, spec: Any, cfg: Any, label: str, trusted: bool, warmup: int, forwards: int) -> Side:
    from . import bottleneck, fingerprint
    from .gate.judge import Rejected, Session
    session = Session(task, spec, cfg, label, trusted=trusted)
    try:
        prof, arts = profile_session(session, task.given, warmup=warmup, forwards=forwards,
                                     artifacts=not task.device.startswith("cpu"), baseline=trusted)
    except Rejected as r:
        return Side(label, spec.path, spec.cls, error=f"{r.check.name}: {r.check.detail.splitlines()[0]}"
                    if r.check.detail else r.check.name)
    except ValueError as e:
        return Side(label, spec.path, spec.cls, error=f"profile: {e}")
    finally:
        session.worker.close()
    return Side(label, spec.path, spec.cls, prof, bottleneck.classify(task.floor, prof), fingerprint.build(prof, arts))


def run(task: Any, cand: Any | None, cfg: Any, *, warmup: int = 3, forwards: int = 5) -> Report:
    """Profile the reference of `task` (gate.judge.Task) and, when given, the candidate `cand` (workload.Spec),
    each in its own worker. A reference that cannot be profiled is a task error (KernelgateError)."""
    from . import bottleneck, fingerprint, targets
    from .errors import KernelgateError
    from .gate.judge import device_name
    from .records import Reason
    from .workload import Spec
    ref_spec = Spec(task.ref.spec.path, task.ref.spec.cls)
    ref = _side(task, ref_spec, cfg, "reference", True, warmup, forwards)
    if ref.error or ref.profile is None:
        raise KernelgateError(f"profiling the reference failed: {ref.error}", Reason.TASK_LOAD)
    machine = targets.machine(task.device)
    try:
        whole = bottleneck.whole_forward(task.oracle.model, task.given, ref.profile.kernels_per_forward)
        ref = dataclasses.replace(ref, fusion=bottleneck.fusion_estimate(whole, machine))
    except Exception as e:  # noqa: BLE001 - the estimate is a hint; the profile stands without it
        ref = dataclasses.replace(ref, profile=dataclasses.replace(
            ref.profile, notes=ref.profile.notes + (f"no fusion estimate: {type(e).__name__}: {e}",)))
    side = dist = None
    if cand is not None:
        side = _side(task, cand, cfg, "candidate", False, warmup, forwards)
        if side.fingerprint is not None and ref.fingerprint is not None:
            dist = fingerprint.distance(ref.fingerprint, side.fingerprint)
    return Report(task.ref.spec.path, task.target, device_name(task.device), machine.name, task.floor, ref, side, dist)
