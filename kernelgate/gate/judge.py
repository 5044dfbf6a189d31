"""The judge: one candidate through every check of the gate, in a process of its own -> records.Verdict.

The gate's parts: task.py (the prepared task: reference, oracle, memory plan, admission), session.py (a
worker session the judge holds: requests, trials, timed batches, re-checks), checks.py (the one comparator
and the output-metadata checks), verdict.py (the one builder of verdicts); measure.py (the interleaved
measurement), baselines.py (eager and torch.compile, kept in the store) and bench.py (the bench command)
time what passed. The names callers use are importable from here.
"""
from __future__ import annotations

import random
import secrets
import time

import torch

from .. import workload
from ..config import GateConfig
from ..records import Check, Reason, Status, Verdict
from ..sandbox import Spares, Worker
from . import memory, screen, timing
from . import verdict as verdicts
from .session import Phase, Rejected, Session, no_phase, worker_limits  # noqa: F401 - the names callers use
from .task import Task, device_name, prepare, resolve_device, timing_pool  # noqa: F401
from .trials import main_count
from .workers import device_limits


#: the name of the check a verdict with a reduced trial plan carries (a family's anchor must not have it)
REDUCED_PLAN = "trial plan (parametric variant)"


def judge(task: Task, cand: workload.Spec, cfg: GateConfig, own_code: bool = False, reduced: str = "",
          worker: Worker | None = None) -> Verdict:
    """Full correctness gate for one candidate, in a process of its own. `own_code`: the candidate is the
    reference or a module kernelgate emitted from it (Session: its worker shares the trusted compile cache).
    `reduced`: why cfg.trials is smaller than the default (recorded as the verdict's trial plan). `worker`: the
    candidate's process, started earlier with no candidate code (`early_worker`), else one is started here."""
    verdict, session = judge_session(task, cand, cfg, own_code=own_code, reduced=reduced, worker=worker,
                                     profiled=False)
    session.worker.close()
    return verdict


def judge_session(task: Task, cand: workload.Spec, cfg: GateConfig, spares: Spares | None = None,
                  phase: Phase = no_phase, reduced: str = "", own_code: bool = False,
                  deadline: float | None = None, worker: Worker | None = None,
                  profiled: bool = True) -> tuple[Verdict, Session]:
    """The gate, returning the candidate's live worker as well (closed unless accepted), so the same
    process can be timed next. The caller closes it. With `spares`, the candidate's process is a spare
    started earlier, and the next spare starts as this one is taken. `phase` times its parts
    (worker start, build, spares, trials, re-check) for the search's accounting.

    `reduced`: the search's reason for fewer main trials (cfg.trials) for a parametric variant of a family
    that passed the full gate (docs/GATE.md, "Parametric variants"); recorded as the verdict's "trial plan"
    check. Only the number of main trials differs: every kind of check runs.

    `deadline` (time.monotonic()): a search's budget for the judgement; a request past it ends the judgement
    rejected for `timeout` (budget), never accepted. `worker`: a process started earlier with no candidate code
    (verify's `early_worker`). `profiled`: the worker may be profiled after it is timed (a search's), so its prime
    starts the profiler's threads."""
    t0 = time.perf_counter()
    with phase("worker start"):         # a spare's prime in flight is waited for here
        if spares is not None:
            worker = spares.take()
    if spares is not None:              # the next one starts now: its prime overlaps this candidate's build and
        with phase("spares"):           # trials (a prime took 4.8 s on an H100, after 2.7 s of imports)
            spares.refill()
    s = Session(task, cand, cfg, worker=worker, own_code=own_code)
    s.phase = phase
    s.deadline = deadline
    s.profiled = profiled               # False: judged (and timed) only, never profiled, so no profiler primed
    s.checks.append(task.admission)
    s.notes.extend(screen.scan(cand.path))
    try:
        if not task.admission.ok:
            return verdicts.build(task, s, Status.ERROR, Reason.DEGENERATE, task.admission.detail, t0), s
        s.checks.append(Check("contract", True, "; ".join(task.contract.assumptions())))
        if reduced:
            s.checks.append(Check(REDUCED_PLAN, True, f"{main_count(task, cfg.trials)} main trials: {reduced}"))
        s.build()
        with phase("build"):
            s.settle()
        with phase("trials"):
            s.trials()
        with phase("re-check"):
            if own_code:        # never timed for a claim (its figures are the baseline's): the processes only
                s.checks.append(Check("timed-loop re-check", True, "not run: the module is kernelgate's wrapper of "
                                      "the reference, whose timing no claim uses"))
                s.check_threads()
            else:
                _timed_recheck(task, s, cfg)
    except Rejected as r:
        s.worker.close()
        task.oracle.reset()             # a trial's load may have left other parameters (the next session's too)
        return verdicts.rejected(task, s, r, t0), s
    except BaseException:
        s.worker.close()
        task.oracle.reset()
        raise
    s.deadline = None                   # judged: the timing that follows keeps its own
    return verdicts.build(task, s, Status.ACCEPTED, Reason.OK, "all checks passed", t0), s


def early_worker(target: str, cfg: GateConfig) -> Worker:
    """A candidate's worker started before its task is prepared (no candidate code in it, nothing sent): its
    interpreter start and torch import, about two seconds on a CPU host, overlap the oracle's preparation. For
    `judge(worker=...)`; the caller closes it if the judgement never starts."""
    w = Worker("candidate", **device_limits(resolve_device(target), cfg))
    w.start()
    return w


def _timed_recheck(task: Task, s: Session, cfg: GateConfig) -> None:
    """A timed batch, outputs picked after it returned re-checked against commitments and the oracle; then
    the worker's threads and processes."""
    rng = torch.Generator().manual_seed(secrets.randbits(62))
    # the lean memory plan: one pool entry, and fewer outputs kept for the re-check (each is a task's worth)
    pool, scalable = timing_pool(task, 1 if task.lean else 2, rng)
    iters = min(cfg.recheck_iters, 3, memory.kept_outputs(task) or 3) if task.lean else cfg.recheck_iters
    s.send_pool(pool, scalable)
    plans = timing.Plans(random.SystemRandom(), len(pool), {})
    # calls for a secret while first (20-100% of soak_ms): a candidate that goes wrong after its N-th call (an
    # autotuner switching kernels, a ring buffer wrapping) was right in every call verify made (red team 31)
    soak = random.Random(secrets.randbits(62)).uniform(0.2, 1.0) * max(cfg.soak_ms, 0.0)
    s.warm_up(plans.new(iters)[1], warmup_ms=soak, warmup_min=1)
    batch = s.time_batch(*plans.new(iters))
    pick = random.SystemRandom()          # drawn after the batch returned
    picks = sorted(pick.sample(range(len(batch.plan)), min(cfg.rechecks, len(batch.plan))))
    s.recheck(batch, picks, pool, scalable)
    s.caller_state("after the warm-up and the timed batch")
    s.checks.append(Check("timed-loop re-check", True, f"{s.rechecked} outputs from timed iterations, picked "
                          "after the batch, match their commitments and the oracle"))
    s.check_threads()
