"""Bench: eager and torch.compile baselines and every verified candidate, interleaved in one run."""
from __future__ import annotations

import logging

from .. import workload
from ..config import GateConfig, TimingConfig
from ..records import BenchResult, BenchRow, Status, Timing, Verdict
from ..versions import conditions
from . import baselines as baselines_mod
from . import timing
from .judge import judge_session
from .measure import HARNESS, measure
from .session import Session
from .task import Task, device_name, fixed_inputs

log = logging.getLogger(__name__)

BASELINES = baselines_mod.NAMES


def bench(task: Task, cands: list[workload.Spec], cfg: GateConfig, tcfg: TimingConfig,
          baselines: tuple[str, ...] = BASELINES, progress=None) -> BenchResult:
    """Verify each candidate, then time baselines and accepted candidates round-robin on fresh inputs."""
    say = progress or (lambda msg: None)
    rows: dict[str, BenchRow] = {}
    verdicts: dict[str, Verdict] = {}
    if not task.admission.ok:
        return BenchResult(task.ref.spec.path, task.target, device_name(task.device), "", (),
                           conditions(task.device), Status.ERROR, task.admission.detail)
    labels = _labels(cands)
    sessions: dict[str, Session] = {}
    baseline_sessions: dict[str, Session] = {}
    ref_spec = task.ref.spec
    try:
        for label, cand in zip(labels, cands):
            say(f"verifying {label}")
            v, s = judge_session(task, cand, cfg, profiled=False)     # verified and timed in the same process
            verdicts[label] = v
            if v.accepted:
                sessions[label] = s
            else:
                rows[label] = BenchRow(label, None, v, None, f"{v.reason.value}: {v.message}")
        baseline_sessions, unavailable, _ = baselines_mod.build(task, baselines, cfg, say)
        baseline_sessions.update(baselines_mod.replicas(task, baseline_sessions, cfg, say))
        for name, why in unavailable.items():
            rows[name] = BenchRow(name, None, None, None, f"unavailable: {why}")
        sessions = {**baseline_sessions, **sessions}     # baselines first
        if not baseline_sessions:
            return BenchResult(ref_spec.path, task.target, device_name(task.device), "", tuple(rows.values()),
                               conditions(task.device), Status.ERROR, "no baseline could be built")
        timings, rejected = measure(task, sessions, cfg, tcfg, say)
    finally:
        for s in {**baseline_sessions, **sessions}.values():
            s.worker.close()
    twice = baselines_mod.merge_replicas(timings)
    base_label = baselines_mod.faster(timings)
    base = timings[base_label]
    for name in baselines:
        if name in timings:
            note = "; ".join(x for x in ("faster baseline" if name == base_label else "", twice.get(name, "")) if x)
            rows[name] = BenchRow(name, timings[name], None, None, note, _fraction(task, timings[name]))
    for label in labels:
        if label in rejected:
            rows[label] = BenchRow(label, timings.get(label), rejected[label], None,
                                   f"{rejected[label].reason.value}: {rejected[label].message}")
        elif label in timings:
            sp = timing.speedup(base, timings[label], fixed=fixed_inputs(task))
            note = "flagged for review: implausibly large speedup" if sp.flagged else ""
            rows[label] = BenchRow(label, timings[label], verdicts[label], sp, note, _fraction(task, timings[label]))
    order = [b for b in baselines if b in rows] + labels
    cond = conditions(task.device)
    if task.memory is not None:
        cond["memory"] = task.memory.to_json()
    if task.floor is not None:
        cond["floor"] = task.floor.to_json()
    status, message = Status.ACCEPTED, ""
    if labels and not any(verdicts.get(k) is not None and verdicts[k].accepted and k not in rejected for k in labels):
        status, message = Status.REJECTED, "no candidate was accepted"
    return BenchResult(ref_spec.path, task.target, device_name(task.device), base_label,
                       tuple(rows[k] for k in order if k in rows), cond, status, message)


def _fraction(task: Task, t: Timing) -> float | None:
    """Share of the roofline floor reached (1.0 = at the floor)."""
    if task.floor is None or task.floor.floor_s <= 0 or t.median_ms <= 0:
        return None
    return task.floor.floor_s * 1e3 / t.median_ms


#: row labels a candidate's file name never takes: a candidate saved as 'eager (2nd process).py' replaced the second
#: eager worker, one saved as '(harness).py' the harness row (red team 48)
RESERVED = frozenset({*BASELINES, *(k + baselines_mod.REPLICA for k in BASELINES), HARNESS})


def _labels(cands: list[workload.Spec]) -> list[str]:
    labels = []
    for c in cands:
        name = c.path.rsplit("/", 1)[-1].removesuffix(".py")
        base, k = name, 2
        while name in labels or name in RESERVED:
            name, k = f"{base}#{k}", k + 1
        labels.append(name)
    return labels
