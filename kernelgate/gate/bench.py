"""Bench: eager and torch.compile baselines and every verified candidate, interleaved in one run."""
from __future__ import annotations

import logging
import random
import secrets
import time

import torch

from .. import workload
from ..config import GateConfig, TimingConfig
from ..records import BenchResult, BenchRow, Reason, Status, Timing, Verdict
from ..versions import conditions
from . import timing
from .judge import Rejected, Session, Task, device_name, judge_session, timing_pool

log = logging.getLogger(__name__)

BASELINES = ("eager", "compile")
CPU_SETTLE_S = 0.2


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
            v, s = judge_session(task, cand, cfg)        # verified and timed in the same process
            verdicts[label] = v
            if v.accepted:
                sessions[label] = s
            else:
                rows[label] = BenchRow(label, None, v, None, f"{v.reason.value}: {v.message}")
        for name in baselines:
            s = Session(task, workload.Spec(ref_spec.path, ref_spec.cls), cfg, name, trusted=True)
            try:
                say(f"building baseline {name}")
                s.build(compile_options={} if name == "compile" else None, baseline=True)
                baseline_sessions[name] = s
            except Rejected as r:
                s.worker.close()
                rows[name] = BenchRow(name, None, None, None, f"unavailable: {r.check.detail.splitlines()[0]}")
        sessions = {**baseline_sessions, **sessions}     # baselines first
        if not baseline_sessions:
            return BenchResult(ref_spec.path, task.target, device_name(task.device), "", tuple(rows.values()),
                               conditions(task.device), Status.ERROR, "no baseline could be built")
        timings, rejected = measure(task, sessions, cfg, tcfg, say)
    finally:
        for s in {**baseline_sessions, **sessions}.values():
            s.worker.close()
    base_label = min((b for b in baselines if b in timings), key=lambda b: timings[b].median_ms)
    base = timings[base_label]
    for name in baselines:
        if name in timings:
            rows[name] = BenchRow(name, timings[name], None, None, "faster baseline" if name == base_label else "",
                                  _fraction(task, timings[name]))
    for label in labels:
        if label in rejected:
            rows[label] = BenchRow(label, timings.get(label), rejected[label], None,
                                   f"{rejected[label].reason.value}: {rejected[label].message}")
        elif label in timings:
            sp = timing.speedup(base, timings[label])
            note = "flagged for review: implausibly large speedup" if sp.flagged else ""
            rows[label] = BenchRow(label, timings[label], verdicts[label], sp, note, _fraction(task, timings[label]))
    order = [b for b in baselines if b in rows] + labels
    cond = conditions(task.device)
    if task.floor is not None:
        cond["floor"] = {"seconds": task.floor.floor_s, "bound": task.floor.bound, "machine": task.floor.machine,
                         "derivation": task.floor.derivation}
    return BenchResult(ref_spec.path, task.target, device_name(task.device), base_label,
                       tuple(rows[k] for k in order if k in rows), cond)


def _fraction(task: Task, t: Timing) -> float | None:
    """Share of the roofline floor reached (1.0 = at the floor)."""
    if task.floor is None or task.floor.floor_s <= 0 or t.median_ms <= 0:
        return None
    return task.floor.floor_s * 1e3 / t.median_ms


def _labels(cands: list[workload.Spec]) -> list[str]:
    labels = []
    for c in cands:
        name = c.path.rsplit("/", 1)[-1].removesuffix(".py")
        base, k = name, 2
        while name in labels or name in BASELINES:
            name, k = f"{base}#{k}", k + 1
        labels.append(name)
    return labels


def measure(task: Task, sessions: dict[str, Session], cfg: GateConfig, tcfg: TimingConfig,
             say) -> tuple[dict[str, Timing], dict[str, Verdict]]:
    rng = torch.Generator().manual_seed(secrets.randbits(62))
    pool, scalable = timing_pool(task, tcfg.pool, rng)
    plans = timing.Plans(random.Random(secrets.randbits(62)), len(pool), {})
    samples: dict[str, list[float]] = {k: [] for k in sessions}
    walls: dict[str, list[float]] = {k: [] for k in sessions}     # judge's clock, ms per iteration, per batch
    gaps: dict[str, list[float]] = {k: [] for k in sessions}      # per batch: wall per iteration - mean sample
    rejected: dict[str, Verdict] = {}
    live = dict(sessions)

    def drop(label: str, r: Rejected) -> None:
        s = live.pop(label)
        s.checks.append(r.check)
        rejected[label] = Verdict(Status.REJECTED, r.reason, f"{r.check.name}: {r.check.detail.splitlines()[0]}",
                                  tuple(s.checks), tuple(s.notes), tuple(task.contract.assumptions()), task.hash, "",
                                  task.target, device_name(task.device))
        s.worker.close()

    for label, s in list(live.items()):
        try:
            s.send_pool(pool, scalable)
            s.warm_up(plans.new(tcfg.iters)[1], tcfg.warmup_ms, 3)
        except Rejected as r:
            if label in BASELINES:
                raise
            drop(label, r)
    rounds = 0
    while rounds < tcfg.rounds or (tcfg.min_total_ms and min(sum(v) for v in samples.values()) < tcfg.min_total_ms):
        order = list(live)
        k = rounds % max(len(order), 1)
        for label in order[k:] + order[:k]:          # rotate who goes first
            tag, plan = plans.new(tcfg.iters)
            if not task.device.startswith("cuda"):
                time.sleep(CPU_SETTLE_S)                # let the last worker's OpenMP threads stop spinning
            try:
                got, wall = live[label].time_batch(tag, plan)
            except Rejected as r:
                if label in BASELINES:
                    raise
                drop(label, r)
                continue
            samples[label] += got
            walls[label].append(wall)
            gaps[label].append(wall - sum(got) / max(len(got), 1))
        rounds += 1
        say(f"round {rounds}: " + ", ".join(f"{k} {timing.quantile(v, 0.5):.4g} ms" for k, v in samples.items() if v))
        if rounds > 10 * tcfg.rounds:
            break
    timings = {k: timing.summarize(k, v, sum(walls[k]) / len(walls[k]), k if k in BASELINES else "candidate")
               for k, v in samples.items() if v}
    ref_label = "eager" if gaps.get("eager") else next(k for k in gaps if gaps[k])
    for label in [k for k in live if k not in BASELINES]:
        s = live[label]
        try:
            bad = timing.clock_mismatch(gaps[ref_label], gaps[label], walls[label])
            if bad:
                s.fail(Reason.TIMER, "outside clock", bad)
            if task.floor is not None and timings[label].median_ms < 0.9 * task.floor.safe_s * 1e3:
                s.fail(Reason.TIMER, "roofline floor", f"median {timings[label].median_ms:.4g} ms is below the "
                       f"memory floor {task.floor.safe_s * 1e3:.4g} ms on {task.floor.machine}: impossible")
            s.recheck(pool, scalable, plans)
            s.check_threads()
        except Rejected as r:
            drop(label, r)
    return timings, rejected
