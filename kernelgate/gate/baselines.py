"""The baselines: eager PyTorch and torch.compile, the reference itself in workers identical to the
candidates', built here for bench (gate/bench.py) and the search (kernelgate/search.py).

The search keeps their measurement in the store (table `baselines`), keyed by workload, device, software
versions and timing settings (`key`), so a second run of the same workload spends its budget on
candidates; only the baselines within 10% of the faster one (`close_enough`) are built and timed against
candidates (`ready`)."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from .. import workload
from ..config import GateConfig, TimingConfig
from ..records import Timing, Verdict
from ..store import Store
from ..versions import code_hash, software
from . import timing
from .measure import measure
from .session import Rejected, Session
from .task import Task, device_name

NAMES = timing.BASELINES
CLOSE = 1.1                  # a baseline slower than this times the faster one is not timed against candidates


def session(task: Task, name: str, cfg: GateConfig) -> Session:
    """The reference itself, as baseline `name`, in a trusted worker of its own (not built yet)."""
    ref = task.ref.spec
    return Session(task, workload.Spec(ref.path, ref.cls), cfg, name, trusted=True)


def build(task: Task, names: list[str] | tuple[str, ...], cfg: GateConfig, say: Callable[[str], None]
          ) -> tuple[dict[str, Session], dict[str, str], dict[str, float]]:
    """Each baseline built in its worker: (sessions built, name -> why one is unavailable, name -> seconds
    its build took). A baseline that cannot be built is left out, its worker closed."""
    built: dict[str, Session] = {}
    unavailable: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in names:
        s = session(task, name, cfg)
        t0 = time.monotonic()
        try:
            say(f"baseline {name}: building")
            s.build(compile_options={} if name == "compile" else None, baseline=True)
            s.call(task.given)         # the first call: torch.compile compiles here, and counts as building
            if task.lean:              # its data (a task's worth on the device, its regions on the host) goes back
                s.release()            # until it is timed (gate/memory.py)
            built[name] = s
        except Rejected as r:
            s.worker.close()
            unavailable[name] = r.check.detail.splitlines()[0] if r.check.detail else r.check.name
        except BaseException:
            for b in [s, *built.values()]:
                b.worker.close()
            raise
        seconds[name] = round(time.monotonic() - t0, 2)
    return built, unavailable, seconds


REPLICA = " (2nd process)"


def replicas(task: Task, built: dict[str, Session], cfg: GateConfig, say: Callable[[str], None]
             ) -> dict[str, Session]:
    """A second worker for each built baseline, timed beside the first (bench's figures, optimize's confirmation).
    Under load one process can be slowed all run long while another is not: on a 2-core CI host an exact copy of
    the reference was claimed 1.06x [1.06, 1.08] against a slowed eager process; with `yes` on both cores and the
    CPU rotation alone (measure.round_cpus), 5 of 6 such copies measured 0.93-1.34x
    (benchmarks/results/cpu_aa_load_session27.json). With each baseline the faster of two processes
    (merge_replicas), a slowed baseline process alone makes no claim; a slowed candidate process only loses. On
    the CPU only: there the worker's process does the work, and on a GPU a second worker would hold a second copy
    of the task's inputs beside the gate's memory plan."""
    if task.lean or task.device.startswith("cuda"):
        return {}
    names = [k for k in NAMES if k in built]
    say(f"baseline {', '.join(names)}: building a second process of each, timed beside the first")
    more, _, _ = build(task, names, cfg, lambda m: None)
    return {k + REPLICA: s for k, s in more.items()}


def merge_replicas(timings: dict[str, Timing]) -> dict[str, str]:
    """Each baseline's figure becomes the faster of its two processes' (see replicas); the second process's row
    is removed. Returns a note per baseline measured twice."""
    notes = {}
    for k in NAMES:
        r = timings.pop(k + REPLICA, None)
        if r is None or k not in timings:
            continue
        a = timings[k]
        if r.median_ms < a.median_ms:
            timings[k] = replace(r, label=k, kind=k)
        notes[k] = f"the faster of 2 processes ({a.median_ms:.4g} and {r.median_ms:.4g} ms)"
    return notes


def faster(timings: dict[str, Timing]) -> str:
    """The baseline with the smaller median (the one speedups are counted against)."""
    return min((k for k in NAMES if k in timings), key=lambda k: timings[k].median_ms)


def close_enough(timings: dict[str, Timing]) -> list[str]:
    """The baselines within 10% of the faster one's median (the others cannot be the faster baseline of a
    later measurement by more than noise)."""
    best = min(t.median_ms for t in timings.values())
    return [k for k in NAMES if k in timings and timings[k].median_ms <= CLOSE * best]


def key(task: Task, tcfg: TimingConfig) -> str:
    """What a kept baseline measurement is valid for: this workload (source, inputs, contract), this
    device, these software versions, this timing configuration and harness (timing.HARNESS_VERSION)."""
    sw = software()
    parts = [task.hash, task.target, device_name(task.device), sw.get("torch"), sw.get("triton"),
             sw.get("python"), repr(tcfg), repr(sorted(task.contract.assumptions())), timing.HARNESS_VERSION]
    if str(task.device).startswith("cpu"):     # the processor's model and the instruction set torch's kernels use
        import torch                              # (one store on two machines: an AVX-512 host's figures and
        from ..targets import cpu_label          # verdicts are not an AVX2 host's)
        parts += [cpu_label(), torch.backends.cpu.get_cpu_capability()]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


@dataclass
class Baselines:
    """The baselines a search times candidates against: the live sessions (those within 10% of the faster),
    every baseline's timing, the faster one, and what checking a baseline costs (building and timing it).
    With `pending`, a baseline is still building in the background (torch.compile compiling on its first call
    while the search gates candidates): `complete()` waits for it, then measures them all (before the first
    candidate is timed, and before the run ends)."""

    sessions: dict[str, Session]
    timings: dict[str, Timing]
    faster: str
    check_s: float
    key: str = ""
    emit_s: float | None = None        # what the gate's check of a module emitted from the faster took, last time
    emit_kind: str = ""                # the baseline emitted last time when not the faster (its module was rejected)
    emit_admission_s: float | None = None   # what task admission took in the run that measured emit_s (its pace)
    pending: Callable[..., None] | None = None
    background: list = field(default_factory=list)     # Background threads (their sessions join `sessions`)
    build_s: dict[str, float] = field(default_factory=dict)   # seconds each baseline's build took (first call in)

    def complete(self, bystanders: tuple[Session, ...] = ()) -> None:
        """Wait for a baseline building in the background, then measure (a no-op when nothing is pending), with
        `bystanders` (other live workers: the candidate about to be timed) frozen while the baselines are timed."""
        finish, self.pending = self.pending, None
        if finish is not None:
            try:
                finish(bystanders)
            except BaseException:
                self.close()
                raise

    def building_s(self) -> float | None:
        """While a baseline builds in the background: how long it has been building (None when nothing is
        pending; 0.0 when it is built and only the measurement is left)."""
        if self.pending is None:
            return None
        return max((t.running_s() for t in self.background), default=0.0)

    def close(self) -> None:
        for s in self.sessions.values():
            s.worker.close()
        for t in self.background:       # built but never measured (a worker still building ends with the judge)
            for s in (t.result[0].values() if t.result is not None else ()):
                s.worker.close()


class Background(threading.Thread):
    """One baseline built (its first call included) in a thread of the judge, its worker doing the work."""

    def __init__(self, task: Task, name: str, cfg: GateConfig, say: Callable[[str], None]):
        super().__init__(daemon=True, name=f"baseline-{name}")
        self.task, self.name_, self.cfg, self.say = task, name, cfg, say
        self.result: tuple[dict[str, Session], dict[str, str], dict[str, float]] | None = None
        self.error: BaseException | None = None
        self.t0 = time.monotonic()

    def running_s(self) -> float:
        """Seconds it has been building (0 once done)."""
        return 0.0 if not self.is_alive() else time.monotonic() - self.t0

    def run(self) -> None:
        try:
            self.result = build(self.task, [self.name_], self.cfg, self.say)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            self.error = e


def ready(task: Task, cfg: GateConfig, tcfg: TimingConfig, store: Store, say: Callable[[str], None],
          note: Callable[[str], None], timing_for: Callable[[float], TimingConfig] | None = None,
          overlap: bool = False, deadline: Callable[[], float | None] | None = None) -> Baselines:
    """Eager and torch.compile for a search: read from the store when this workload was measured before on
    this device with this software and timing (then only those within 10% of the faster are built), else
    built, timed side by side (`timing_for(seconds the builds took)` may shorten the measurement) and kept;
    then only those within 10% of the faster stay alive (every candidate is timed interleaved with them, so
    fewer baselines mean more candidates). Progress goes to `say`, what the result should record to `note`.
    With `overlap`, a compile baseline that must be measured builds in the background (Baselines.pending):
    its compile (30 s for a small CNN on a 2-core CPU with a cold cache) overlaps the first candidates' gate.
    `deadline()`, asked when the measurement starts: the clock's reading (time.monotonic) its rounds end by, past
    the first two (gate/measure.py MIN_ROUNDS), so that the rest of the run still fits its budget.
    Raises RuntimeError when no baseline can be built."""
    k = key(task, tcfg)
    kept = store.baselines(k)
    names = list(NAMES)
    timings: dict[str, Timing] = {}
    base, check_s = "", 0.0
    if kept is not None:
        when, doc = kept
        timings = {n: Timing.from_json(v) for n, v in doc["timings"].items()}
        base, check_s = doc["faster"], float(doc.get("check_s", 0.0))
        names = close_enough(timings)
        msg = (f"baselines from the store (measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(when))} with "
               f"this workload, device and software): " + ", ".join(f"{n} {t.median_ms:.4g} ms" for n, t in
                                                                    timings.items())
               + f"; faster: {base}; building {', '.join(names)} to time candidates against")
        note(msg)
        say(msg)
    later = [n for n in names if n == "compile"] if overlap and kept is None and len(names) > 1 else []
    background = [Background(task, n, cfg, say) for n in later]
    for t in background:            # started first: its compile runs while the others build
        t.start()
    try:
        sessions, unavailable, build_s = build(task, [n for n in names if n not in later], cfg, say)
    except BaseException:
        for t in background:        # nothing will wait for it: its worker goes with this failure
            t.join()
            for s in (t.result[0].values() if t.result is not None else ()):
                s.worker.close()
        raise
    if not sessions and not background:
        for n, why in unavailable.items():
            note(f"baseline {n} unavailable: {why}")
        raise RuntimeError("no baseline could be built")
    if kept is not None and base in build_s:    # this run's build (a warm compile cache) and the kept measurement
        share = max(check_s - float(kept[1].get("build_s", {}).get(base, 0.0)), 0.0)
        check_s = build_s[base] + share
    elif kept is None:                           # until measured: what the baselines built so far took
        check_s = max(build_s.values(), default=0.0)
    same = kept is not None and kept[1].get("emit_s") is not None and kept[1].get("faster") == base
    b = Baselines(sessions, timings, base, check_s, k, float(kept[1]["emit_s"]) if same else None,
                  str(kept[1].get("emit_kind", "")) if kept is not None else "",
                  emit_admission_s=kept[1].get("emit_admission_s") if same else None)
    b.build_s = {**(kept[1].get("build_s", {}) if kept is not None else {}), **build_s}

    def finish(bystanders: tuple[Session, ...] = ()) -> None:
        for t in background:
            t.join()
            if t.error is not None:
                raise t.error
            got, why, secs = t.result
            sessions.update(got)
            unavailable.update(why)
            build_s.update(secs)
            b.build_s.update(secs)
        for n, why in unavailable.items():
            note(f"baseline {n} unavailable: {why}")
        if not sessions:
            raise RuntimeError("no baseline could be built")
        if kept is None or base not in sessions:
            timed = timing_for(sum(build_s.values())) if timing_for is not None else tcfg
            t_measure = time.monotonic()
            stopped: list[str] = []
            b.timings, _ = measure(task, dict(sessions), cfg, timed, lambda m: stopped.extend(
                [m] if m.startswith("stopped") else []), deadline=deadline() if deadline is not None else None,
                bystanders=bystanders)
            for m in stopped:               # cut short: the budget's end needs the time (said, and in the result)
                note(f"the baselines' measurement {m}")
                say(f"the baselines' measurement {m}")
            b.faster = faster(b.timings)
            # what the faster one cost: its build (its first call included) and its share of the measurement
            b.check_s = build_s.get(b.faster, 0.0) + (time.monotonic() - t_measure) / max(len(sessions), 1)
            store.put_baselines(k, {"timings": {n: t.to_json() for n, t in b.timings.items()}, "faster": b.faster,
                                    "build_s": build_s, "check_s": b.check_s})
            say("baselines: " + ", ".join(f"{n} {t.median_ms:.4g} ms" for n, t in b.timings.items())
                + f"; faster: {b.faster}" + (lean_cost(task, timed, len(sessions), time.monotonic() - t_measure)
                                             if getattr(task, "lean", False) else ""))
            for name in [n for n in sessions if n not in close_enough(b.timings)]:
                sessions.pop(name).worker.close()
                note(f"baseline {name} ({b.timings[name].median_ms:.4g} ms) is more than 10% slower than "
                     f"{b.faster}: candidates are timed against {b.faster} alone")

    b.background, b.pending = background, finish
    if background:
        say(f"baseline {', '.join(later)}: building in the background while candidates are checked")
    else:
        b.complete()
    return b


def lean_cost(task: Task, tcfg: TimingConfig, n: int, seconds: float) -> str:
    """What the measurement cost in the lean memory plan, where every batch sends the timing inputs to its worker
    through the host (gate/measure.py: one transfer per implementation and round, the harness and the warm-up on
    their worker's)."""
    gib = sum(x.numel() * x.element_size() for x in task.given if hasattr(x, "element_size")) / 2**30
    return (f" (measured in {seconds:.0f} s, {tcfg.rounds} rounds: the lean memory plan sends the {gib:.3g} GiB "
            f"of timing inputs to a worker before each of its {n * tcfg.rounds} batches)")


#: what the check of an emitted baseline takes where the store keeps the gate's verdict on the same bytes
#: (`verified_emit`): emitting the file and hashing it
EMIT_VERIFIED_S = 1.0


def remember_emit(store: Store, key: str, seconds: float, kind: str = "", admission_s: float = 0.0,
                  sha: str = "", verdict: dict | None = None) -> None:
    """Keep what emitting a baseline took (the gate's checks of the modules tried: the time a later run of this
    workload keeps for it, Planner.reserve_s, at that run's pace: `admission_s`, what task admission took in this
    one, search.policy.pace) and, where the faster baseline's module was rejected, the kind emitted instead (a later
    run emits that one directly). With `sha` and `verdict`: the emitted file's bytes (sha256) and the gate's verdict
    on them, with this kernelgate's code (`verified_emit`)."""
    kept = store.baselines(key) if key else None
    if kept is not None:
        doc = {**kept[1], "emit_s": round(seconds, 2), "emit_kind": kind,
               "emit_admission_s": round(admission_s, 3) if admission_s > 0 else None}
        if sha and verdict is not None:
            doc["emit_verified"] = {"sha": sha, "code": code_hash(), "verdict": verdict}
        store.put_baselines(key, doc)


def kept_builds_s(doc: dict | None) -> float:
    """What building the baselines a run times candidates against took when the kept record `doc` was measured:
    those within 10% of the faster (`close_enough`), each built again in every run. 0.0 without a record."""
    if not doc:
        return 0.0
    timings = {n: t for n, v in (doc.get("timings") or {}).items() for t in [Timing.from_json(v)] if t is not None}
    builds = doc.get("build_s") or {}
    return sum(float(builds.get(n, 0.0) or 0.0) for n in (close_enough(timings) if timings else []))


def verified_emit(doc: dict | None, sha: str | None = None) -> dict | None:
    """The gate's verdict (JSON) an earlier run kept for the module emitted from a baseline, where it holds: kept with
    this workload, device, software and timing (the record `doc`, under baselines.key) and this kernelgate's code, and,
    given `sha`, for these bytes. None otherwise. The module is the reference's own code in kernelgate's drop-in
    wrapper, written the same way every time (emit.py): the same bytes were judged by the same gate."""
    got = (doc or {}).get("emit_verified")
    if not isinstance(got, dict) or got.get("code") != code_hash() or not isinstance(got.get("verdict"), dict):
        return None
    if sha is not None and got.get("sha") != sha:
        return None
    try:                                # a record that does not make a verdict (an edited store) is none
        if not Verdict.from_json(got["verdict"]).accepted:
            return None
    except (KeyError, TypeError, ValueError):
        return None
    return got["verdict"]
