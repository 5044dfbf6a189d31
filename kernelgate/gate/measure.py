"""The interleaved measurement: every session (baselines and verified candidates) timed round-robin on the
judge's clock, each batch while every other worker is frozen, the harness's own cost subtracted, candidates'
outputs re-checked (gate/session.py). Used by bench (gate/bench.py), the baselines (gate/baselines.py) and
the search's evaluations."""
from __future__ import annotations

import dataclasses
import itertools
import os
import random
import secrets
import time

import torch

from ..config import GateConfig, TimingConfig
from ..records import Reason, Timing, Verdict
from ..sandbox import Spares, loop, prebuild
from . import memory, timing
from . import verdict as verdicts
from .session import Rejected, Session
from .task import Task, timing_pool

BASELINES = timing.BASELINES
CPU_SETTLE_S = 0.05
HARNESS = "(harness)"                # the harness alone, timed in a baseline's worker: subtracted from every row
MIN_ROUNDS = 2                       # a measurement cut short by its deadline still has this many rounds
MIN_BATCH = 3                        # iterations of a batch cut short by TimingConfig.batch_s
WARMUP_MIN = 3                       # calls of every warm-up, at least


def batch_iters(tcfg: TimingConfig, per_iter_s: float | None) -> int:
    """Iterations of the next batch: tcfg.iters, or with `batch_s` set, as many as take about that long at
    the implementation's last per-iteration figure on the judge's clock (at least MIN_BATCH): a call of
    0.6 s, harness included (a 256 MiB CPU input), made a 60 s budget's two rounds of baselines take 51 s."""
    if not tcfg.batch_s or not per_iter_s or per_iter_s <= 0:
        return tcfg.iters
    return max(MIN_BATCH, min(tcfg.iters, int(tcfg.batch_s / per_iter_s)))


def round_cpus(task: Task) -> list[int]:
    """The CPUs a CPU task's rounds take in turn (the judge's own), one per round, every implementation of a
    round on the same one; none on a GPU. Workers have one thread, and the scheduler keeps a thread on the CPU
    it last ran on: on one CPU a round, a slower CPU (another tenant's load, a busy sibling hyperthread) costs
    every row of that round alike. A process slowed all run long is what gate/baselines.py's replicas answer."""
    if task.device.startswith("cuda") or not hasattr(os, "sched_setaffinity"):
        return []
    return sorted(os.sched_getaffinity(0))


def _tids(s: Session) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{s.worker.pid}/task")]
    except (OSError, AssertionError, AttributeError):     # no worker process (yet, or a stand-in's)
        return []


def pin(s: Session, cpus: set[int]) -> None:
    """Every thread of `s`'s worker on `cpus` (the judge may; seccomp lets a worker set only its own)."""
    for tid in _tids(s):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:              # a thread that ended meanwhile
            pass


def check_pin(s: Session, cpus: set[int], what: str) -> None:
    """After a batch: the worker ran where the judge put it. The lockdown refuses a worker any affinity change;
    where seccomp is not available, one that moved to the CPU it found fastest would have a better CPU than its
    round's."""
    for tid in _tids(s):
        try:
            got = os.sched_getaffinity(tid)
        except OSError:
            continue
        if got != cpus:
            s.fail(Reason.TIMER, "CPU affinity", f"during {what} the worker's thread {tid} ran on CPUs "
                   f"{sorted(got)}, where the judge put it on {sorted(cpus)} (every row of a round shares one CPU)")


def measure(task: Task, sessions: dict[str, Session], cfg: GateConfig, tcfg: TimingConfig,
            say, deadline: float | None = None, bystanders: tuple[Session, ...] = ()
            ) -> tuple[dict[str, Timing], dict[str, Verdict]]:
    """See _measure; `bystanders`: other live workers (a candidate waiting to be timed next), frozen throughout,
    as are extension builders (sandbox/prebuild.py) and spare workers with a prime in flight (sandbox/spares.py)."""
    for b in bystanders:
        b.pause()
    try:
        # extension builds ahead of their candidates, and spares' primes, wait meanwhile
        with prebuild.paused(), Spares.held():
            return _measure(task, sessions, cfg, tcfg, say, deadline)
    finally:
        for b in bystanders:
            b.resume()


def _measure(task: Task, sessions: dict[str, Session], cfg: GateConfig, tcfg: TimingConfig,
             say, deadline: float | None = None) -> tuple[dict[str, Timing], dict[str, Verdict]]:
    """Time every session interleaved, on the judge's clock: rounds of one batch per implementation
    (rotating who goes first) while every other worker is frozen. Each iteration is one step the judge
    sends and times until the worker's answer (its commitment to the output), so the per-iteration time
    is the judge's; the harness's own cost (round trip, input building, L2 flush, checks, digests),
    measured the same way in a baseline's worker with a stand-in output, is subtracted from every row
    (from a candidate's, the smaller of that and its own process's harness figure); a candidate row whose
    harness is most of its time is compared with its harness included, a baseline's claims nothing
    (timing.resolvable, timing.with_harness).
    After a candidate's batch, the judge decides with its own randomness whether and which of its
    outputs to re-check. In-process samples are kept as diagnostics."""
    rng = torch.Generator().manual_seed(secrets.randbits(62))
    cap = memory.kept_outputs(task)
    if task.lean:       # gate/memory.py: one pool entry; each worker holds inputs only while it is timed
        tcfg = dataclasses.replace(tcfg, pool=1, iters=min(tcfg.iters, 5))
    pool, scalable = timing_pool(task, tcfg.pool, rng)
    plans = timing.Plans(random.SystemRandom(), len(pool), {})
    secret = random.SystemRandom()          # re-check choices: never sent to a worker
    host = next((k for k in BASELINES if k in sessions), next((k for k, s in sessions.items() if s.trusted), None))
    walls: dict[str, list[float]] = {k: [] for k in [*sessions, HARNESS]}
    inproc: dict[str, list[float]] = {k: [] for k in [*sessions, HARNESS]}
    batches: dict[str, list[int]] = {k: [] for k in sessions}  # each round's kept samples, by count (the claim's noise)
    own: dict[str, list[float]] = {k: [] for k in sessions}   # each candidate's harness, in its own process
    rejected: dict[str, Verdict] = {}
    live = dict(sessions)

    def drop(label: str, r: Rejected) -> None:
        s = live.pop(label)
        s.worker.close()
        rejected[label] = verdicts.rejected(task, s, r)

    def alone(label: str) -> None:
        """Only `label`'s worker may run: every other one is frozen (no spinner can slow the one timed)."""
        for k, s in live.items():
            (s.resume if k == label else s.pause)()

    # every batch opens with `lead` untimed steps, alike for every row: on the H200 the first step after a worker
    # thaws took up to twice the rest (attention: 5.2-6.3 ms against 3.1), a fifth of the samples of 5-step batches
    lead = max(0, tcfg.lead_in)
    per_iter: dict[str, float] = {}     # seconds per iteration on the judge's clock, by label (batch_iters)

    def warm(label: str, s: Session) -> None:
        t_warm = time.monotonic()
        s.warm_up(plans.new(tcfg.iters)[1], tcfg.warmup_ms, WARMUP_MIN)
        # an upper bound (the warm-up makes at least WARMUP_MIN calls), until the first batch's figure
        per_iter[label] = (time.monotonic() - t_warm) / WARMUP_MIN

    def timed(label: str, s: Session) -> None:
        """One batch of `label` (HARNESS: the harness alone, in its host's worker), its re-check and, for a
        candidate, its own process's harness batch; the worker holds the pool."""
        n = batch_iters(tcfg, per_iter.get(label, per_iter.get(host)))     # the harness: its host's first
        if cap is not None:                  # the lean plan: what the worker keeps fits (memory.kept_outputs)
            n = max(1, min(n, cap - lead))
        tag, plan = plans.new(lead + n)
        b = s.time_batch(tag, plan, null=label == HARNESS)
        kept = b.walls_ms[lead:]
        walls[label] += kept
        if kept:
            per_iter[label] = sum(kept) / len(kept) / 1e3
            if label in batches:
                batches[label].append(len(kept))
        inproc[label] += b.samples_ms[lead:]
        if not s.trusted and label != HARNESS and secret.random() < cfg.recheck_rate:
            s.recheck(b, [secret.randrange(len(plan))], pool, scalable)
            if not task.device.startswith("cuda"):
                time.sleep(CPU_SETTLE_S)    # the oracle's OpenMP threads, in the judge, stop spinning
        if not s.trusted and label != HARNESS:   # the harness in its own process too (see below)
            if task.lean and not s.pooled:
                s.send_pool(pool, scalable)
            own[label] += s.time_batch(*plans.new(lead + batch_iters(tcfg, per_iter.get(label))),
                                       null=True).walls_ms[lead:]

    # the lean plan sends the pool (a task's worth through the host) before every batch, since each worker gives
    # its memory back after one: there the warm-up opens an implementation's first batch and the harness's batch
    # follows its host's, each on the same transfer (2 rounds of 2 baselines: 4 transfers, not 8)
    warmed: set[str] = set()
    for label, s in list(live.items()) if not task.lean else ():
        try:
            alone(label)
            s.send_pool(pool, scalable)
            warm(label, s)
        except Rejected as r:
            if label in BASELINES or s.trusted:
                raise
            drop(label, r)
    cpus = round_cpus(task)
    rounds, round_s = 0, 0.0
    while rounds < tcfg.rounds or (tcfg.min_total_ms and min(sum(walls[k]) for k in live) < tcfg.min_total_ms):
        # a round that would end past the deadline is not started (its time: the last round's)
        if deadline is not None and rounds >= MIN_ROUNDS and time.monotonic() + round_s > deadline:
            say(f"stopped after {rounds} rounds: the time for this measurement is up")
            break
        t_round = time.monotonic()
        order = list(live) + ([HARNESS] if host in live and not task.lean else [])
        k = rounds % max(len(order), 1)
        cpu = {cpus[rounds % len(cpus)]} if cpus else set()     # this round's CPU, every row's
        for label in order[k:] + order[:k]:          # rotate who goes first
            s = live[host if label == HARNESS else label]
            try:
                alone(host if label == HARNESS else label)
                if cpu:
                    pin(s, cpu)
                if task.lean:
                    s.send_pool(pool, scalable)
                    if label not in warmed:
                        warm(label, s)
                        warmed.add(label)
                timed(label, s)
                if task.lean and label == host:
                    if not s.pooled:
                        s.send_pool(pool, scalable)
                    timed(HARNESS, s)
                if task.lean:
                    s.release()
                if cpu:
                    check_pin(s, cpu, f"round {rounds + 1}")
            except Rejected as r:
                if label in BASELINES or s.trusted:
                    raise
                drop(label, r)
        rounds += 1
        round_s = time.monotonic() - t_round
        say(f"round {rounds}: " + ", ".join(f"{k} {timing.quantile(v, 0.5):.4g} ms" for k, v in walls.items() if v))
        if rounds > 10 * tcfg.rounds:
            break
    dwalls, dnull = drawn(task, live, plans, lead, alone, drop, secret, host)
    for s in live.values():
        if cpus:
            pin(s, set(cpus))
        s.resume()
    harness_ms = timing.harness_cost([walls[HARNESS]], [walls[k] for k in live if live[k].trusted and walls[k]])
    timings = {}
    for label, got in walls.items():
        if label == HARNESS or not got or label not in live:
            continue
        # a candidate's row loses the smaller of the trusted harness figure and its own process's: one that
        # made the harness cheaper in its process (allocator settings, cheaper bit-identical functions) loses
        # less, and one that slowed its own harness runs gains nothing
        h = harness_ms if live[label].trusted or not own[label] else min(harness_ms, timing.harness_cost(
            [own[label]], []))
        per_call = timing.less_harness(got, h)
        cuts = list(itertools.accumulate(batches[label], initial=0))
        timings[label] = timing.summarize(label, per_call, sum(got) / len(got),
                                          label if label in BASELINES else "candidate", h,
                                          timing.quantile(inproc[label], 0.5) if inproc[label] else None,
                                          [per_call[a:b] for a, b in zip(cuts, cuts[1:])])
        if dwalls.get(label):
            # the harness on the same masked draws (`drawn`): the host's, a candidate's own where lower
            hd = timing.harness_cost([dnull[host]], [dwalls[k] for k in live if live[k].trusted
                                                               and dwalls.get(k)]) if dnull.get(host) else h
            if not live[label].trusted and dnull.get(label):
                hd = min(hd, timing.harness_cost([dnull[label]], []))
            timings[label] = dataclasses.replace(
                timings[label], drawn_ms=timing.quantile(timing.less_harness(dwalls[label], hd), 0.5))
    for label in [k for k in live if not live[k].trusted]:
        s = live[label]
        try:
            # half the harness's cost is allowed for the uncertainty of subtracting it
            if task.floor is not None and timings[label].median_ms + 0.5 * harness_ms < 0.9 * task.floor.safe_s * 1e3:
                s.fail(Reason.TIMER, "roofline floor", f"median {timings[label].median_ms:.4g} ms is below the "
                       f"memory floor {task.floor.safe_s * 1e3:.4g} ms on {task.floor.machine}: impossible")
            if s.rechecked == 0:                       # every measured candidate has at least one re-check
                tag, plan = plans.new(tcfg.iters)
                if task.lean or any(dwalls.values()):     # the worker holds the workload's draws (`drawn`)
                    s.send_pool(pool, scalable)
                b = s.time_batch(tag, plan)
                s.recheck(b, [secret.randrange(len(plan))], pool, scalable)
            s.check_threads()
        except Rejected as r:
            drop(label, r)
            timings.pop(label, None)
    return timings, rejected


#: batches of fresh draws of the workload's own generator timed per row after the rounds (`drawn`), each entry
#: called once: DRAWN_ENTRIES timed calls a batch, after the lead-in's (about a pool's worth of entries at a time;
#: a batch's cost is mostly sending its draws to each row, about a second on a loaded 2-core CPU)
DRAWN_BATCHES, DRAWN_ENTRIES = 2, 4


def drawn(task: Task, live: dict[str, Session], plans: timing.Plans, lead: int, alone, drop,
          secret: random.Random, host: str) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Judge walls (harness included) of every live row on fresh draws of the workload's own generator (seeds
    the worker never sees), each entry called once per row and given as it is: the workload's arrangement of
    values, their structure and point masses exactly, which the timed draws (sandbox/loop.fresh: a smoothed
    bootstrap of the pool's values) do not keep (red team 64: nearly sorted floats put at fresh positions; red team
    65: a 5-smooth FFT length jittered to slow ones). The same draws for every row, each row's sent masked by its
    own steps' seeds (sandbox/loop.masked: red team 66 read a batch's draws from its own memory during the lead-in
    and answered the timed calls from a memo, 98-202x); every timed output of a candidate's batch is re-checked
    (with one, a candidate wrong on half of them escaped one batch in two). Also the harness alone on the same
    steps (a null batch: the host's, and each candidate's own), since a masked draw costs another harness than
    a timed one's: `drawn_harness`. timing.speedup withholds a claim these figures disagree with. Not on the lean
    memory plan (each entry is a task's worth of memory), nor past the device's memory."""
    got: dict[str, list[float]] = {k: [] for k in live}
    null: dict[str, list[float]] = {k: [] for k in live}
    if task.lean or not live:
        return got, null
    rng = random.SystemRandom()
    n = lead + DRAWN_ENTRIES
    for _ in range(DRAWN_BATCHES):
        try:
            entries = [task.inputs(rng.randrange(1 << 30)) for _ in range(n)]
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            return {k: [] for k in live}, {k: [] for k in live}
        for label in list(live):
            s = live[label]
            try:
                alone(label)
                tag, plan = plans.each(n)
                both = _masked(entries, plan)
                if both is None:
                    return {k: [] for k in live}, {k: [] for k in live}
                sent, marks = both
                s.send_pool(sent, marks)
                b = s.time_batch(tag, plan)
                got[label] += b.walls_ms[lead:]
                if not s.trusted:
                    s.recheck(b, list(range(lead, n)), sent, marks)
                if label == host or not s.trusted:
                    null[label] += s.time_batch(plans.again(plan), plan, null=True).walls_ms[lead:]
                del sent
            except Rejected as r:
                if label in BASELINES or s.trusted:
                    raise
                drop(label, r)
                got.pop(label, None)
        del entries
    return got, null


def _masked(entries: list[list[Any]], plan: list) -> tuple[list[list[Any]], list[Any]] | None:
    """The pool as a batch's worker gets it: every tensor of entry j masked by the seed of the step calling it
    (sandbox/loop.masked, `masked_tree` for lists, tuples and dicts of tensors); other inputs as they are. None where the generator's dtypes differ from draw to draw (a
    pool's marks are per input)."""
    seed_of = {j: seed for j, _, seed in plan}
    sent, marks = [], None
    for j, xs in enumerate(entries):
        pairs = [loop.masked(x, seed_of[j], k) if isinstance(x, torch.Tensor) else loop.masked_tree(x, seed_of[j], k)
                 for k, x in enumerate(xs)]
        sent.append([p[0] for p in pairs])
        mk = [p[1] for p in pairs]
        if marks is not None and mk != marks:
            return None
        marks = mk
    return sent, marks or []
