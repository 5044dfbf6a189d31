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

The records themselves (`Launch`, `Profile`) live in records.py. The worker is reached through a session
passed in (a `gate.judge.Session`, used only through `build`, `request`, `task` and `cfg`): this package
never imports the gate; api.profile creates the sessions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .records import Launch, Profile

MARKER = "kernelgate.forward"             # record_function name prefix; ".<i>" is the forward's index
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")   # lower-cased; older kineto: Memcpy
CUDA_CATEGORIES = ("user_annotation",) + DEVICE_CATEGORIES
CPU_CATEGORIES = ("user_annotation", "cpu_op")
ARGS = ("grid", "block", "registers per thread", "shared memory", "stream", "device", "correlation", "bytes",
        "est. achieved occupancy %")
KIND_OF = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "memcpy": "memcpy", "memset": "memset",
           "cpu_op": "op"}
PERSISTENT_MIN_US = 50.0                  # a kernel with <= one block per SM running this long loops inside
MAX_EVENTS = 200_000                      # events a worker may ship back
MAX_NAME = 1000                           # characters of a name kept


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
    from .. import targets
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
