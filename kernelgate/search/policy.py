"""The search's policy, with no gate in it: the budget on an injected clock, the mode of each generation
(explore / refine / restart), the cost priors of an evaluation, the incumbent.

Everything here works on records (Candidate, Evaluation) and numbers; tests/search/test_search_policy.py
drives it with a fake clock.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config import TimingConfig
from ..proposers import EXPLORE, REFINE, RESTART
from ..records import Candidate, Evaluation

#: the search's batches take about this long at most (gate/measure.batch_iters): a slow call (a large CPU input)
#: gets fewer iterations per batch instead of a measurement that outlasts the budget
BATCH_S = 2.0

__all__ = ["Budget", "SearchConfig", "OutOfBudget", "Planner", "Modes", "PLAN_SHARE", "EXPLORE", "REFINE",
           "RESTART", "best", "best_ratio", "promising", "cost_kind", "family", "variant_anchor"]

Clock = Callable[[], float]


@dataclass(frozen=True)
class Budget:
    seconds: float = 300.0
    candidates: int = 64


@dataclass(frozen=True)
class SearchConfig:
    per_generation: int = 2               # small generations: a refiner stacks on a winner early in a short budget
    patience: int = 2                     # generations without improvement before a restart
    promising: float = 0.97               # refine only on a candidate at least this fast relative to the baseline
    promising_host: float = 0.6           # ... or this fast when launch- or latency-bound (graph capture may pay)
    confirm_tries: int = 2                # contenders re-judged and re-timed afresh at the end, best first
    #: the confirmation's timing (None: the search's with CONFIRM_ROUNDS times its rounds, a fresh plan: the claim
    #: rule's noise is the spread of the rounds' medians; attention on the H200: 5 rounds, a 10.9% spread)
    confirm_timing: TimingConfig | None = None
    timing: TimingConfig = TimingConfig(warmup_ms=200.0, rounds=5, iters=10, batch_s=BATCH_S)
    profile: bool = True                  # profile accepted candidates (bottleneck line, fingerprint)
    shares: tuple[tuple[str, int], ...] = ()     # proposer name -> candidates asked of it per generation
                                                 # (default: per_generation each)
    empty_generations: int = 3            # generations in a row without a proposal that end the search (one
                                          # ends it when every proposer lists its modes or has stopped)
    variant_trials: int = 4               # main trials for a parametric variant of a family that passed the full
                                          # gate (variant_anchor; docs/GATE.md "Parametric variants"); 0: never
                                          # reduce. 4 is the fewest that keeps every kind of trial: the given
                                          # inputs, perturbed parameters, both complementary negations
    profile_min: float = 0.6              # profile an accepted candidate only from this speedup up (none slower can
                                          # be `promising`, whose lowest bar is promising_host)

    def share(self, proposer: str) -> int:
        return dict(self.shares).get(proposer, self.per_generation)


PLAN_SHARE = 0.95          # share of the budget the search plans to use
CONFIRM_ROUNDS = 2         # the confirmation times this many times the search's rounds (SearchConfig.confirm_timing)


class OutOfBudget(Exception):
    pass


# ------------------------------------------------------------------ the incumbent

def best(history: Sequence[Evaluation]) -> Evaluation | None:
    """The fastest candidate with a claimed speedup over the baseline it was timed against."""
    good = [e for e in history if e.accepted and e.speedup is not None and e.speedup.claimed]
    return max(good, key=lambda e: e.speedup.ratio) if good else None


NEAR = 1.05                 # an accepted candidate this much faster in the search is confirmed even if unclaimed


def contenders(history: Sequence[Evaluation]) -> list[Evaluation]:
    """What the confirmation re-measures, in order: the claimed candidates, fastest first, then accepted ones at
    least NEAR times faster whose search measurement was too short to claim (on the H200 the search's five
    rounds left a 1.18x attention kernel under a 1.20 bar). Only the fresh measurement's own claim counts: the
    search merely picks what to measure again, so picking among noisy figures inflates nothing."""
    done = [e for e in history if e.accepted and e.speedup is not None]
    claimed = sorted((e for e in done if e.speedup.claimed), key=lambda e: -e.speedup.ratio)
    near = sorted((e for e in done if not e.speedup.claimed and e.speedup.ratio >= NEAR), key=lambda e: -e.speedup.ratio)
    return claimed + near


def contender(history: Sequence[Evaluation]) -> Evaluation | None:
    """The first the confirmation will try (the time kept for the end of the run is kept for it)."""
    c = contenders(history)
    return c[0] if c else None


def best_ratio(history: Sequence[Evaluation]) -> float:
    b = best(history)
    return b.speedup.ratio if b else 1.0


def promising(history: Sequence[Evaluation], cfg: SearchConfig) -> bool:
    """Whether some accepted candidate is near or past the baseline: stacking levels on a clearly slower
    one spends the budget where it cannot pay. A launch- or latency-bound candidate (its time mostly host
    work around the kernels) counts from `promising_host` on: graph capture, stacked on it, removes
    exactly that part."""
    def near(e: Evaluation) -> bool:
        if not (e.accepted and e.speedup is not None):
            return False
        host = str((e.insight or {}).get("bound", "")) in ("launch", "latency")
        return e.speedup.ratio >= (cfg.promising_host if host else cfg.promising)
    return any(near(e) for e in history)


# ------------------------------------------------------------------ parametric variants

LIBRARY = "library"


def _tuning_only(a: Candidate, b: Candidate) -> bool | None:
    """Whether b's stack is a's with only tuning parameters changed: None when the stacks are not of one family
    (other levels, other order, other parameter names, or a change to a parameter that is not tuning), False
    when they are the same stack, True for a parametric variant."""
    if len(a.stack) != len(b.stack) or not a.stack:
        return None
    differs = False
    for x, y in zip(a.stack, b.stack):
        px, py = dict(x.params), dict(y.params)
        if x.name != y.name or set(px) != set(py):
            return None
        changed = {k for k in px if px[k] != py[k]}
        if changed - set(x.tuning) or x.tuning != y.tuning:
            return None
        differs = differs or bool(changed)
    return differs


def variant_anchor(c: Candidate, history: Sequence[Evaluation],
                   full_gate: Callable[[Evaluation], bool] = lambda e: True) -> Evaluation | None:
    """The evaluation that makes `c` a parametric variant of a family that passed, or None (then c gets the
    full gate). c qualifies only when it is the strategy library's (never an LLM's or a person's), has a typed
    stack, and some accepted library candidate whose verdict came from the full gate (`full_gate`) has the same
    stack with only its levels' tuning parameters (Level.tuning) changed; and no member of that family
    (tuning-only variants of c) was rejected in this run (a family with one failure gets the full gate for every
    further variant)."""
    if c.proposer != LIBRARY or not c.stack:
        return None
    anchor = None
    for e in history:
        o = e.candidate
        if o.proposer != LIBRARY or o.id == c.id:
            continue
        rel = _tuning_only(o, c)
        if rel is None:
            continue
        if not e.accepted:
            return None
        if anchor is None and rel and full_gate(e):
            anchor = e
    return anchor


# ------------------------------------------------------------------ cost priors

def family(c: Candidate) -> str:
    """The strategy a candidate's stack starts with (its bottom level); a candidate without a stack is its
    own family (its strategy label)."""
    return c.stack[0].name if c.stack else c.strategy


def cost_kind(c: Candidate) -> str:
    """What an evaluation of c costs like: a stack with a compile level costs what compiling costs, else its
    family's."""
    return "runtime:compile" if any(lv.name == "runtime:compile" for lv in c.stack) else family(c)


#: the check of an emitted baseline over building (first call included) and timing that baseline, before a run
#: measured it (on a 2-core CPU: 4.9 s against 4.5 s for an eager conv, 29 s against 20-25 s for a compiled LayerNorm
#: with a cold compile cache)
EMIT_OVER_BASELINE = 1.3
#: the same where the baselines' workers and the emitted check share the trusted compile cache (the check then
#: loads what the baseline's build compiled): on the H200 the check of an emitted compile baseline took 13.2-13.4 s
#: against builds of about 25 s, and 1.3x the build kept 36 s of a 60 s run (it stopped 28-34 s in); on the
#: 2-core CPU a LayerNorm's compile took 13-15 s cold, 5-6 s warm
EMIT_OVER_BASELINE_CACHED = 0.7
#: the check of an emitted baseline over task admission's trials, before a run measured it, on the 2-core CPU: 9.4-9.8x
#: on a 256 MiB tanh (78-92 s against 8.0-9.8 s, its trials alone 5.5x), 16x on a 64 MiB one (25.8 s against 1.6 s,
#: mostly the compile baseline's build), 10-16x for the projection example at 4096 tokens, idle (8.4-13.1 s against
#: 0.78-0.82 s) or with both cores busy elsewhere (21.5-29.6 s against 2.0-2.2 s; cpu_admission_load_session28.json,
#: cpu_budget_load_session28.json); about the lowest (5.5x was the trials alone)
EMIT_OVER_ADMISSION = 9.5
#: the same on a GPU, where it was not measured again: 5.5x as before (on the H200 the check took 6-13 s against
#: preparations of 5.5-8 s, admission included: 9.5x there would keep several times the check's time)
EMIT_OVER_ADMISSION_GPU = 5.5


def emit_over_admission(device: str) -> float:
    """EMIT_OVER_ADMISSION on the CPU, EMIT_OVER_ADMISSION_GPU on a GPU (`device`: the task's, as "cuda:0")."""
    return EMIT_OVER_ADMISSION if device.startswith("cpu") else EMIT_OVER_ADMISSION_GPU
#: building and measuring the baselines over task admission's trials, at the least, before a run measured them
#: (56 s against 8.2 s for 256 MiB, 33 s against 1.6 s for 64 MiB: a CPU tanh, each with torch.compile's build)
BASELINES_OVER_ADMISSION = 3.0
#: the least the check of an emitted module takes whatever the task (a worker started, the module built, its trials:
#: 3.3 s for a small conv on the 2-core CPU, 11 s for a 1024 x 2048 pointwise chain)
EMIT_MIN_S = 2.0
#: The lean memory plan on a GPU (gate/memory.py, forwards over 1 GiB): admission's trials say little of a check's
#: time there. Before a run measured them, the emitted baseline's check is expected to take LEAN_CHECK_S (a worker
#: started, the module built through the build phase's calls of a task's worth each), LEAN_TRIALS_OVER_ADMISSION
#: times admission's trials, and, where the judge keeps its data on the host, LEAN_EMIT_CROSSINGS moves of the given
#: inputs, each as long as prepare's move of them to the host (Task.crossing_s); the baselines LEAN_BASELINES_S (two
#: workers started and built), BASELINES_OVER_ADMISSION times admission and LEAN_BASELINE_CROSSINGS moves. Measured
#: on an H100 (benchmarks/results/h100_lean_home_session35.json), the reduced check of an emitted baseline: a 12 GiB
#: forward with its data on the device, 43 s (worker 9.5 s, build 15.6 s, trials 16.2 s against admission's 1.3 s);
#: the same with its data on the host, 127 s (10 s, 21.7 s, 94 s; admission 1.5 s, a move 0.58 s), a 14 GiB forward
#: 216 s (11.5 s, 27.6 s, 173 s; 2.3 s, 0.90 s); the baselines 51-70 s with their measurement cut to 2 rounds or
#: not. The model gives 41, 130 and 187 s for the three checks. (The moves were first counted in a lean-plan run on
#: the CPU, 50 for the check: a GPU run then took three times the figure.)
LEAN_CHECK_S = 25.0
LEAN_TRIALS_OVER_ADMISSION = 12.0
LEAN_EMIT_CROSSINGS = 150.0
LEAN_BASELINES_S = 35.0
LEAN_BASELINE_CROSSINGS = 25.0


def first_emit_s(ratio: float, admission_s: float, crossing_s: float = 0.0, lean_gpu: bool = False) -> float:
    """What the gate's check of a module emitted from a baseline is expected to take before a run measured one:
    `ratio` (emit_over_admission) times task admission's trials, at least EMIT_MIN_S; in the lean memory plan on a
    GPU (`lean_gpu`) the LEAN_* model above."""
    if lean_gpu:
        return LEAN_CHECK_S + LEAN_TRIALS_OVER_ADMISSION * admission_s + LEAN_EMIT_CROSSINGS * crossing_s
    return max(EMIT_MIN_S, ratio * admission_s)


#: what optimize may overrun its budget by (the promise: the budget plus 10%)
OVERRUN = 1.1


#: the time kept for an emitted check an earlier run measured, over that figure at this run's pace: the same check
#: varies from run to run (the projection example's at 4096 tokens with both cores of a 2-core CPU busy elsewhere:
#: 21.5 s, then 28.7 s, and that run ended 3.8 s past the promise: cpu_budget_load_session28.json)
EMIT_AGAIN = 1.25
#: how far an earlier run's figure is scaled by this run's pace (PACE_RANGE[0] to PACE_RANGE[1] times)
PACE_RANGE = (0.7, 2.0)


def pace(admission_s: float, then_s: Any) -> float:
    """This run's pace against an earlier one's: the square root of task admission's trials now over then (`then_s`;
    1.0 where either is unknown), within PACE_RANGE. A figure kept from an idle machine understates the same work on
    a loaded one: the projection example's admission (4096 tokens) took 2.0-2.2 s with both cores of a 2-core CPU
    busy elsewhere against 0.78-0.82 s idle, and the check of its emitted module 21.5-29.6 s against 8.4-13.1 s
    (cpu_admission_load_session28.json, cpu_budget_load_session28.json). Damped, since admission is short and noisy
    under load: with the plain ratio one loaded run kept 66 s for a check that took 29.6 s, and tried no candidate
    (cpu_budget_load_session28.json, `undamped_pace`)."""
    try:
        then = float(then_s)
    except (TypeError, ValueError):
        return 1.0
    if then <= 0.0 or admission_s <= 0.0:
        return 1.0
    return min(max((admission_s / then) ** 0.5, PACE_RANGE[0]), PACE_RANGE[1])


def least_s(admission_s: float, kept: dict[str, Any] | None, device: str = "cpu",
            crossing_s: float = 0.0, verified_s: float | None = None, builds_s: float = 0.0,
            lean: bool = False) -> tuple[float, str]:
    """The least the rest of a run takes whatever its search does, and how that was found: measuring the baselines
    (nothing where the store keeps them: `kept`, the store's record for this workload, device and software) and the
    gate's check of the emitted module, which every run ends with (what it took in an earlier run of the workload at
    this run's pace, else emit_over_admission(device) times task admission's trials, at least EMIT_MIN_S; in the lean
    memory plan (`lean`) on a GPU, first_emit_s's model, with LEAN_*_CROSSINGS moves of the inputs through the host,
    `crossing_s` each, where the judge keeps its data there).
    `verified_s`: the store keeps the gate's verdict on the module this run would emit from the baseline
    (gate/baselines.verified_emit), and the check is then emitting and hashing it. `builds_s`: with the baselines
    kept, building those a run times candidates against again (gate/baselines.kept_builds_s)."""
    builds = (f" and building the baselines to time candidates against {builds_s:.0f} s (as when they were "
              "measured)") if kept is not None and builds_s >= 0.5 else ""
    builds_s = builds_s if kept is not None else 0.0
    if verified_s is not None and kept is not None:
        return verified_s + builds_s, ("the gate's verdict on the module emitted from the baseline is kept from an "
                                       "earlier run (the same bytes, workload, device, software and kernelgate)"
                                       + builds)
    if kept is not None and kept.get("emit_s") is not None:
        then = float(kept["emit_s"])
        emit_s = then * pace(admission_s, kept.get("emit_admission_s"))
        at = f" ({emit_s:.0f} s at this run's pace)" if abs(emit_s - then) >= 0.5 else ""
        return emit_s + builds_s, (f"the check of the emitted module took {then:.0f} s in an earlier run of this "
                                   f"workload{at}" + builds)
    ratio = emit_over_admission(device)
    lean_gpu = lean and device.startswith("cuda")
    emit = first_emit_s(ratio, admission_s, crossing_s, lean_gpu)
    base = 0.0 if kept is not None else BASELINES_OVER_ADMISSION * admission_s + (
        LEAN_BASELINES_S + LEAN_BASELINE_CROSSINGS * crossing_s if lean_gpu else 0.0)
    moves = (f", {crossing_s:.2g} s a move of the inputs through the host ({LEAN_EMIT_CROSSINGS:g} and "
             f"{LEAN_BASELINE_CROSSINGS:g} of them)") if lean_gpu and crossing_s > 0 else ""
    if lean_gpu:
        how = (f"the check of the emitted module takes about {emit:.0f} s (in the lean memory plan: a worker and its "
               f"build {LEAN_CHECK_S:g} s, {LEAN_TRIALS_OVER_ADMISSION:g}x task admission's {admission_s:.1f} s"
               + (moves if not base else "") + ")" + (f" and the baselines at least {base:.1f} s (two workers "
               f"{LEAN_BASELINES_S:g} s, {BASELINES_OVER_ADMISSION:g}x admission{moves})" if base else ""))
    else:
        how = (f"the check of the emitted module takes about {emit:.0f} s ({ratio:g}x task admission's "
               f"{admission_s:.1f} s)" + (f" and the baselines at least {base:.1f} s ({BASELINES_OVER_ADMISSION:g}x)"
                                          if base else ""))
    return emit + base + builds_s, how + builds
#: what a baseline still building in the background may yet cost the run, over the seconds it has built so far
PENDING_OVER_ELAPSED = 2.0
#: and measuring the baselines once it is built, over task admission's trials, at the least (the 4096-token projection
#: example on a loaded 2-core CPU: the baselines 11-12 s in all against admission's 2.0-2.2 s; a first candidate
#: judged meanwhile had left no time for their measurement)
PENDING_OVER_ADMISSION = 4.0


class Planner:
    """The budget: seconds on a clock (time.monotonic in a run: the gate's deadlines are on it), what each
    evaluation took, and what the next one and the end of the run (confirming the best, checking the emitted
    module) should take."""

    def __init__(self, budget: Budget, clock: Clock = time.monotonic):
        self.budget, self.clock = budget, clock
        self.t0 = clock()
        self.durations: list[float] = []           # seconds per evaluation
        self.cost: dict[str, float] = {}            # candidate id -> seconds its evaluation took
        #: candidate id -> what judging and timing it again takes (confirm_s): its evaluation's own phases, less
        #: profiling and waiting for a baseline (a first candidate waits for the compile baseline's build: with
        #: that and its profile, gru's 5.8x counted 42 s where its confirmation took 6 s, and was not confirmed)
        self.again: dict[str, float] = {}
        self.timing_s: dict[str, float] = {}        # candidate id -> its measurement's seconds (in `again`)
        self.baseline_check_s = 0.0                 # what building and timing one baseline cost
        #: the same for the eager baseline (no compiler in its build): a first candidate that compiles nothing is
        #: built like it (a warm softmax run kept 25 s after rebuilding the compile baseline and tried no C++
        #: candidate, each expected to cost the compile baseline's 20 s build again); 0.0: not known
        self.plain_check_s = 0.0
        self.baseline_emit_s: float | None = None   # the check of the module emitted from it, in an earlier run
        #: how long a baseline has been building in the background (None: none pending): the run's end then
        #: waits for the rest of its build, measures it, and may check a module emitted from it
        self.pending_s: Callable[[], float | None] = lambda: None
        self.compile_build_s = 0.0                  # the compile baseline's build: what a compile candidate's costs
        self.admission_s = 0.0                      # task admission's trials (Task.admission_s)
        self.crossing_s = 0.0                       # the lean plan on a GPU: one move of the inputs (Task.crossing_s)
        self.lean_gpu = False                       # the task is judged in the lean memory plan on a GPU
        self.emit_over_admission = EMIT_OVER_ADMISSION     # emit_over_admission(the task's device)
        self.emit_over_baseline = EMIT_OVER_BASELINE   # EMIT_OVER_BASELINE_CACHED with a shared compile cache
        #: whether the confirmation judges and times the module emitted from a contender (optimize's: one judgement
        #: for both the confirmation and the emitted module's check), not the contender's own source
        self.emit_confirms = False

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def left(self) -> float:
        """Seconds left to plan with: the budget less what was spent and a 5% margin (evaluations and the
        final check take longer than planned on a loaded machine; the promise is the budget plus 10%)."""
        return PLAN_SHARE * self.budget.seconds - self.elapsed()

    def at(self, share: float, less: float = 0.0) -> float:
        """The clock's reading at `share` of the budget, less `less` seconds (a deadline)."""
        return self.t0 + share * self.budget.seconds - less

    def avg_s(self) -> float:
        return sum(self.durations) / len(self.durations) if self.durations else 0.0

    def record(self, candidate_id: str, seconds: float) -> None:
        self.durations.append(seconds)
        self.cost[candidate_id] = seconds

    def confirm_s(self, e: Evaluation) -> float:
        """What confirming e takes (judging and timing it again) and checking the module emitted from it (its
        verdict's time again). Where the confirmation judges and times the emitted module itself (`emit_confirms`),
        that check is the confirmation, and what is kept beside it is the check of the baseline's module emitted
        instead should the confirmation fail."""
        cid = e.candidate.id
        longer = (CONFIRM_ROUNDS - 1) * self.timing_s.get(cid, 0.0)     # its measurement has more rounds
        after = self.baseline_emit_estimate() if self.emit_confirms else e.verdict.seconds
        return self.again.get(cid, self.cost.get(cid, self.avg_s())) + longer + after

    def baseline_emit_estimate(self) -> float:
        """What the gate's check of a module emitted from the faster baseline takes: as long as it took before
        (EMIT_AGAIN), else about 0.7-1.3 times building and timing the baseline."""
        if self.baseline_emit_s is not None:
            return EMIT_AGAIN * self.baseline_emit_s
        return max(self.emit_over_baseline * self.baseline_check_s,
                   first_emit_s(self.emit_over_admission, self.admission_s, self.crossing_s, self.lean_gpu))

    def reserve_s(self, best_now: Evaluation | None) -> float:
        """Time kept for confirming the best candidate (its own evaluation again) and for the gate's check
        of the module emitted from it (its verdict's time again)."""
        pending = self.pending_s()
        # a baseline still building: the rest of its build and its measurement, at least twice what it has taken
        # so far (a build as long again, then a check as long); one built and not yet measured (0.0), or just
        # started, at least its measurement. The emitted check comes after it: a first candidate judged while the
        # compile baseline built left no time for the two (a 90 s budget took 133-142 s on a loaded CPU)
        extra = 0.0 if pending is None else max(PENDING_OVER_ELAPSED * pending,
                                                PENDING_OVER_ADMISSION * self.admission_s)
        if best_now is None:    # the emitted module is then the faster baseline's
            return self.baseline_emit_estimate() + extra
        return self.confirm_s(best_now) + extra

    def expected_s(self, c: Candidate, history: Sequence[Evaluation]) -> float:
        """What evaluating c should take: the average, or the longest earlier evaluation of its kind in this
        run when longer (a torch.compile mode that autotuned for 40 s will again)."""
        kind = cost_kind(c)
        same = [self.cost[e.candidate.id] for e in history
                if e.candidate.id in self.cost and cost_kind(e.candidate) == kind]
        # before any evaluation, one costs about what building and timing a baseline did (one that compiles nothing
        # the eager baseline's, and the trials task admission ran); a compiling one at least what building the
        # compile baseline did
        if kind == "runtime:compile":
            first, floor = self.baseline_check_s, self.compile_build_s
        else:
            first, floor = (self.plain_check_s + self.admission_s if self.plain_check_s else self.baseline_check_s), 0.0
        return max([self.avg_s() if self.durations else first, floor] + same)

    def fits(self, seconds: float, history: Sequence[Evaluation]) -> bool:
        """Whether `seconds` of work fits before the time kept for the end of the run."""
        return seconds <= self.left() - self.reserve_s(contender(history))

    def check(self, history: Sequence[Evaluation]) -> None:
        """Stop before an evaluation that would not finish in time (leaving room to confirm the best)."""
        need = (self.avg_s() if self.durations else 0.0) + self.reserve_s(contender(history))
        if self.left() <= need or len(history) >= self.budget.candidates:
            raise OutOfBudget


# ------------------------------------------------------------------ modes

class Modes:
    """The mode of each generation: explore on even generations and while nothing verified is near the
    baseline, refine on odd ones, restart (explore from the reference again) once `patience` generations
    in a row brought no improvement, until one does."""

    def __init__(self, cfg: SearchConfig, ratio: float = 1.0):
        self.cfg = cfg
        self.stale = 0
        self.best_ratio = ratio

    def mode(self, generation: int, near: bool) -> str:
        if self.stale >= self.cfg.patience:
            return RESTART
        return EXPLORE if generation % 2 == 0 or not near else REFINE

    def after(self, ratio: float) -> bool:
        """A generation ended with best ratio `ratio`: True when the next one restarts."""
        self.stale = 0 if ratio > self.best_ratio else self.stale + 1
        self.best_ratio = max(self.best_ratio, ratio)
        return self.stale >= self.cfg.patience
