"""The search: baselines first, then generations of explorers and refiners through the gate, within a budget.

The population lives in the store (table `candidates`, keyed by run id), so an interrupted run resumes
without re-evaluating finished candidates. The faster baseline is always the incumbent: a candidate
becomes best only with a claimed speedup over it.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable


from . import workload
from .config import GateConfig, TimingConfig
from .gate import baselines as baselines_mod
from .gate import bench as bench_mod
from .gate.judge import Rejected, Session, Task, device_name, judge_session, worker_limits
from .sandbox import Spares
from .gate import timing
from .graph import analyse
from .profiling import summary
from .proposers import Context
from .proposers.library import Library
from .proposers.library.library import REWRITE_FNS, strategy_family
from .records import Candidate, Evaluation, OptimizeResult, Status, Timing
from .store import Store
from .versions import conditions

log = logging.getLogger(__name__)


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
    confirm_tries: int = 2                # claimed candidates re-judged and re-timed afresh at the end, best first
    confirm_timing: TimingConfig | None = None   # the confirmation's timing (None: the search's, a fresh plan)
    timing: TimingConfig = TimingConfig(warmup_ms=200.0, rounds=5, iters=10)
    profile: bool = True                  # profile accepted candidates (bottleneck line, fingerprint)


PLAN_SHARE = 0.95          # share of the budget the search plans to use


class OutOfBudget(Exception):
    pass


class Search:
    def __init__(self, task: Task, run_id: str, out_dir: Path, budget: Budget, seed: int, cfg: GateConfig,
                 scfg: SearchConfig, store: Store, say: Callable[[str], None]):
        self.task, self.run_id, self.out_dir, self.budget = task, run_id, out_dir, budget
        self.cfg, self.scfg, self.store, self.say = cfg, scfg, store, say
        self.rng = random.Random(seed)
        self.library = Library()
        self.history: list[Evaluation] = [Evaluation.from_json(d) for d in store.evaluations(run_id)]
        self.t0 = time.monotonic()
        self.notes: list[str] = []
        self.base_label = ""
        self.timings: dict[str, Timing] = {}
        self.base_sessions: dict[str, Session] = {}
        self.durations: list[float] = []           # seconds per evaluation, to plan within the budget
        self.cost: dict[str, float] = {}            # candidate id -> seconds its evaluation took
        self.base_insight: dict | None = None       # the faster baseline's profile summary
        self.estimates: dict = {}                     # strategy -> profiling.fusion.FusionEstimate
        self.confirmed: Evaluation | None = None      # the best after confirm(), with its fresh measurement
        self.confirmations: list[dict] = []           # each confirmation tried: search vs fresh figures
        self.confirm_ran = False
        self.spares: Spares | None = None             # the next candidate's worker, started ahead
        self.baseline_check_s = 0.0                   # expected cost of the gate's check of an emitted baseline

    # ------------------------------------------------------------ budget
    def left(self) -> float:
        """Seconds left to plan with: the budget less what was spent and a 5% margin (evaluations and the
        final check take longer than planned on a loaded machine; the promise is the budget plus 10%)."""
        return PLAN_SHARE * self.budget.seconds - (time.monotonic() - self.t0)

    def _avg_s(self) -> float:
        return sum(self.durations) / len(self.durations) if self.durations else 0.0

    def reserve_s(self) -> float:
        """Time kept for confirming the best candidate (its own evaluation again) and for the gate's check
        of the module emitted from it (its verdict's time again)."""
        best = self.best()
        if best is None:        # the emitted module is then the faster baseline: its check costs about what
            return self.baseline_check_s    # building and timing that baseline did
        return self.cost.get(best.candidate.id, self._avg_s()) + best.verdict.seconds

    def expected_s(self, c: Candidate) -> float:
        """What evaluating c should take: the average, or the longest earlier evaluation of its strategy
        family in this run when longer (a torch.compile mode that autotuned for 40 s will again)."""
        def kind(strategy: str) -> str:      # a stack with a compile level costs what compiling costs
            return "runtime:compile" if "runtime:compile" in strategy else strategy_family(strategy)
        same = [self.cost[e.candidate.id] for e in self.history
                if e.candidate.id in self.cost and kind(e.candidate.strategy) == kind(c.strategy)]
        # before any evaluation, one costs about what building and timing a baseline did
        return max([self._avg_s() if self.durations else self.baseline_check_s] + same)

    def check_budget(self) -> None:
        """Stop before an evaluation that would not finish in time (leaving room to confirm the best)."""
        need = (self._avg_s() if self.durations else 0.0) + self.reserve_s()
        if self.left() <= need or len(self.history) >= self.budget.candidates:
            raise OutOfBudget

    # ------------------------------------------------------------ baselines
    def baselines(self) -> None:
        """Eager and torch.compile (gate/baselines.py): built and timed side by side, or read from the store when
        this workload was measured before on this device with this software; only the baselines within 10% of
        the faster stay alive. Building them counts against the budget: past half of it, they are measured
        with 2 rounds."""
        def timing_for(build_s: float) -> TimingConfig:
            tcfg = self.scfg.timing
            if self.left() < 0.5 * self.budget.seconds and tcfg.rounds > 2:
                msg = (f"building the baselines took {build_s:.0f} s of the {self.budget.seconds:.0f} s "
                       f"budget: measuring them with 2 rounds instead of {tcfg.rounds} (their figures are kept in the "
                       "store, so the next run of this workload spends its budget on candidates)")
                self.notes.append(msg)
                self.say(msg)
                tcfg = replace(tcfg, rounds=2)
            return tcfg
        b = baselines_mod.ready(self.task, self.cfg, self.scfg.timing, self.store, self.say, self.notes.append,
                                timing_for)
        self.base_sessions, self.timings, self.base_label = b.sessions, b.timings, b.faster
        self.baseline_check_s = b.check_s
        if self.scfg.profile:
            self.base_insight = summary.try_observe(self.base_sessions[self.base_label], self.notes, self.base_label)
            if self.base_insight:
                self.notes.append(f"faster baseline ({self.base_label}): {self.base_insight['bottleneck']}")
                self.say(f"baseline {self.base_label}: {self.base_insight['bottleneck']}")

    # ------------------------------------------------------------ evaluation
    def evaluate(self, c: Candidate) -> Evaluation:
        """Gate, then time against the faster baseline, interleaved; record in the store."""
        t0 = time.monotonic()
        ev = self._judge_and_time(c, self.scfg.timing, profile=self.scfg.profile,
                                  deadline=self.t0 + PLAN_SHARE * self.budget.seconds - self.reserve_s())
        self.store.add_evaluation(self.run_id, ev)
        self.history.append(ev)
        self.durations.append(time.monotonic() - t0)
        self.cost[c.id] = self.durations[-1]
        self.say(progress_line(len(self.history), ev, self.best()))
        return ev

    def _judge_and_time(self, c: Candidate, tcfg: TimingConfig, profile: bool,
                        deadline: float | None = None) -> Evaluation:
        """The full gate in a fresh worker, then a measurement interleaved with both baselines."""
        path = self.out_dir / "candidates" / f"{c.id}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(c.source)
        spec = workload.Spec(str(path.resolve()), workload.CANDIDATE_CLASS)
        # a build cannot run past what is left of the budget (torch.compile's autotuning can take minutes)
        cfg = replace(self.cfg, build_timeout=max(10.0, min(self.cfg.build_timeout, self.left() - self.reserve_s())))
        verdict, s = judge_session(self.task, spec, cfg, self.spares)
        ev = Evaluation(c, verdict)
        if verdict.accepted:
            try:
                sessions = {**self.base_sessions, c.id: s}
                # rounds stop at the deadline (at least 2): a spread over fewer rounds is wider, so the
                # claim threshold rises with it
                timings, rejected = bench_mod.measure(self.task, sessions, self.cfg, tcfg, lambda m: None, deadline)
                if c.id in rejected:
                    ev = Evaluation(c, rejected[c.id])
                else:
                    base = min((timings[b] for b in self.base_sessions), key=lambda t: t.median_ms)
                    found = (summary.try_observe(s, self.notes, c.strategy)
                             if profile and (deadline is None or time.monotonic() < deadline) else None)
                    family = strategy_family(c.strategy)
                    if family in self.estimates and " + " not in c.strategy:
                        pred = self.predicted_ms().get(family)
                        found = {**(found or {}), "fusion_estimate": {
                            "predicted_ms": pred, "measured_ms": timings[c.id].median_ms,
                            "derivation": self.estimates[family].derivation}}
                    ev = Evaluation(c, verdict, timings[c.id], base, timing.speedup(base, timings[c.id]), found)
            except Rejected as r:
                ev = Evaluation(c, replace(verdict, status=Status.REJECTED, reason=r.reason,
                                           message=f"{r.check.name}: {r.check.detail.splitlines()[0]}"))
            finally:
                s.worker.close()
        return ev

    def confirm(self) -> None:
        """Guard against the winner's curse: the fastest of several noisy measurements overstates its
        speedup (a host shared with other work, clock and memory-placement drift between measurements).
        Candidates with a claimed speedup, best first, are judged again in a fresh worker and timed afresh,
        interleaved with both baselines (new inputs, new plan); the first whose fresh
        measurement still claims is the result, with the fresh figures. One that does not is reported
        and not kept; with none confirmed the baseline is kept."""
        self.confirm_ran = True
        claimed = sorted((e for e in self.history if e.accepted and e.speedup is not None and e.speedup.claimed),
                         key=lambda e: -e.speedup.ratio)
        for e in claimed[:self.scfg.confirm_tries]:
            # the emitted module's own check follows: keep its time too, within the budget plus 10%
            need = self.cost.get(e.candidate.id, self._avg_s()) + e.verdict.seconds
            if self.left() + 0.1 * self.budget.seconds < need:
                msg = (f"{e.candidate.strategy}: {e.speedup.ratio:.2f}x in the search, but no time is left to confirm "
                       f"it ({need:.0f} s needed, {max(self.left(), 0):.0f} s left): not kept")
                self.notes.append(msg)
                self.say(msg)
                break
            self.say(f"confirming {e.candidate.strategy} ({e.speedup.ratio:.2f}x in the search) with a fresh measurement")
            fresh = self._judge_and_time(e.candidate, self.scfg.confirm_timing or self.scfg.timing, profile=False,
                                         deadline=self.t0 + 1.05 * self.budget.seconds - e.verdict.seconds)
            sp = fresh.speedup
            ok = fresh.accepted and sp is not None and sp.claimed
            self.confirmations.append({
                "candidate": e.candidate.id, "strategy": e.candidate.strategy,
                "search_ratio": e.speedup.ratio, "search_ci": [e.speedup.low, e.speedup.high],
                "fresh_ratio": sp.ratio if sp else None, "fresh_ci": [sp.low, sp.high] if sp else None,
                "fresh_threshold": sp.threshold if sp else None,
                "fresh_ms": fresh.timing.median_ms if fresh.timing else None,
                "fresh_baseline_ms": fresh.baseline.median_ms if fresh.baseline else None,
                "verdict": fresh.verdict.status.value if fresh.accepted else
                f"{fresh.verdict.reason.value}: {fresh.verdict.message}", "confirmed": ok})
            if ok:
                self.confirmed = replace(fresh, insight=e.insight)
                self.say(f"confirmed: {sp.ratio:.2f}x [{sp.low:.2f}, {sp.high:.2f}]")
                return
            got = f"{sp.ratio:.2f}x [{sp.low:.2f}, {sp.high:.2f}]" if sp else fresh.verdict.message
            msg = (f"{e.candidate.strategy}: {e.speedup.ratio:.2f}x in the search, but a fresh measurement gave {got}: "
                   "not confirmed, not kept")
            self.notes.append(msg)
            self.say(msg)

    def best(self) -> Evaluation | None:
        """The fastest candidate with a claimed speedup over the baseline it was timed against."""
        good = [e for e in self.history if e.accepted and e.speedup is not None and e.speedup.claimed]
        return max(good, key=lambda e: e.speedup.ratio) if good else None

    def context(self) -> Context:
        t = self.task
        base = self.timings.get(self.base_label) if self.base_label else None
        return Context(Path(t.ref.spec.path).read_text(), t.ref.spec.cls, "cuda" if t.device.startswith("cuda")
                       else "cpu", device_name(t.device), t.contract, self.graph, tuple(self.history), {},
                       baseline_ms=base.median_ms if base else None, predicted_ms=self.predicted_ms())

    def fusion_estimates(self) -> None:
        """What each generated-kernel strategy would save on this machine: what the strategy library says
        each fuses (proposers/library/fusion_estimates.py), priced by profiling/fusion.py, from the
        reference's graph on meta tensors; recorded next to each candidate's measurement."""
        from . import targets
        from .profiling import fusion
        from .proposers.library.fusion_estimates import strategy_fusions
        import torch
        try:
            try:        # built on the meta device: no copy of the weights
                with torch.device("meta"):
                    model = self.task.ref.cls(*self.task.ref.init_inputs).eval()
            except Exception:  # noqa: BLE001 - a constructor that needs real tensors: copy the reference
                model = self.task.oracle.model
            self.estimates = fusion.strategy_estimates(strategy_fusions, model, self.task.given,
                                                       targets.machine(self.task.device))
        except Exception as e:  # noqa: BLE001 - an estimate is a hint; the search runs without it
            self.notes.append(f"no fusion estimates: {type(e).__name__}: {e}")
            self.estimates = {}

    def predicted_ms(self) -> dict[str, float]:
        """Strategy -> eager time minus its predicted saving (ms), once the eager baseline is timed."""
        eager = self.timings.get("eager")
        if eager is None:
            return {}
        return {k: max(eager.median_ms - e.predicted_s * 1e3, 1e-6) for k, e in self.estimates.items()}

    # ------------------------------------------------------------ loop
    def run(self) -> None:
        self.graph = analyse(self.task.oracle.model, self.task.oracle.ops, REWRITE_FNS)
        if not self.graph.traced:
            self.notes.append(self.graph.note)
        else:
            applied = {k: v for k, v in self.graph.patterns.items() if v}
            where = ", ".join(f"{k} ({v} place{'s' if v > 1 else ''})" for k, v in applied.items())
            self.notes.append(f"graph: {self.graph.summary()}; rewrites that apply: {where or 'none'}; "
                              "every other op is left as the reference wrote it (runtime configurations only)")
        self.fusion_estimates()
        self.spares = Spares(**worker_limits(self.task, self.cfg))
        self.spares.refill()                          # starts while the baselines build
        self.baselines()
        if self.left() <= self.reserve_s():
            msg = (f"the budget ({self.budget.seconds:.0f} s) was used up by the baselines (and the time kept for "
                   "the check of the emitted module); no candidate was tried (give a larger --budget)")
            self.notes.append(msg)
            self.say(msg)
            raise OutOfBudget
        self.check_budget()
        generation = max((e.candidate.generation for e in self.history), default=-1) + 1
        stale, best_ratio = 0, self._best_ratio()
        # rebuild the library's stacks for candidates evaluated before a resume (refiners stack on them)
        self.library.restore(self.context(), [e.candidate for e in self.history])
        while True:
            self.check_budget()
            ctx = self.context()
            mode = "explore" if generation == 0 or stale >= self.scfg.patience or generation % 2 == 0 \
                or not self.promising() else "refine"
            props = self.library.propose(ctx, self.rng, self.scfg.per_generation, generation, mode)
            if not props:
                other = "refine" if mode == "explore" else "explore"
                props = self.library.propose(ctx, self.rng, self.scfg.per_generation, generation, other)
            if not props:
                self.say("no more candidates to try")
                return
            tried = 0
            for c in props:
                self.check_budget()
                expected = self.expected_s(c)
                if expected > self.left() - self.reserve_s():
                    self.say(f"skipped {c.strategy}: candidates of its kind took {expected:.0f} s here, "
                             f"{self.left():.0f} s left")
                    continue
                self.evaluate(c)
                tried += 1
            if not tried:
                raise OutOfBudget
            ratio = self._best_ratio()
            stale = 0 if ratio > best_ratio else stale + 1
            if stale >= self.scfg.patience:
                self.say(f"generation {generation}: no improvement for {stale} generations; restarting from the reference")
            best_ratio = max(best_ratio, ratio)
            generation += 1

    def promising(self) -> bool:
        """Whether some accepted candidate is near or past the baseline: stacking levels on a clearly slower
        one spends the budget where it cannot pay. A launch- or latency-bound candidate (its time mostly host
        work around the kernels) counts from `promising_host` on: graph capture, stacked on it, removes
        exactly that part."""
        def near(e: Evaluation) -> bool:
            if not (e.accepted and e.speedup is not None):
                return False
            host = str((e.insight or {}).get("bound", "")) in ("launch", "latency")
            return e.speedup.ratio >= (self.scfg.promising_host if host else self.scfg.promising)
        return any(near(e) for e in self.history)

    def _best_ratio(self) -> float:
        b = self.best()
        return b.speedup.ratio if b else 1.0

    def close(self) -> None:
        for s in self.base_sessions.values():
            s.worker.close()
        if self.spares is not None:
            self.spares.close()


def progress_line(k: int, e: Evaluation, best: Evaluation | None) -> str:
    """The line printed after a candidate (kernelgate/report.py words it from the records)."""
    from .report import progress_line as line
    return line(k, e.to_json(), best.to_json() if best else None)


def finalize(search: Search) -> OptimizeResult:
    """The result: the best candidate (timed interleaved with both baselines), or the faster baseline."""
    t = search.task
    best = search.confirmed if search.confirm_ran else search.best()
    eager, compiled = search.timings.get("eager"), search.timings.get("compile")
    # fingerprint distance of every profiled candidate to the best one (or to the kept baseline)
    anchor = best.insight if best is not None else search.base_insight
    history = tuple(replace(e, insight={**e.insight, "distance_to_best": summary.distance(e.insight, anchor)})
                    if e.insight else e for e in search.history)
    best = next((h for h, e in zip(history, search.history) if e is best), best)
    if best is not None and best.insight and anchor is not None:
        best = replace(best, insight={**best.insight, "distance_to_best": 0.0})
    if best is not None:
        base = best.baseline
        base_label = base.label
        base_ms, best_ms, final = base.median_ms, best.timing.median_ms, best.speedup
    else:
        base_label = search.base_label
        base_ms = best_ms = search.timings[base_label].median_ms
        final = None
    return OptimizeResult(
        workload=t.ref.spec.path, target=t.target, device=device_name(t.device), baseline_kind=base_label,
        baseline_ms=base_ms, eager=eager, compiled=compiled, best=best, final=final, best_ms=best_ms,
        evaluations=history, conditions=conditions(t.device),
        contract=tuple(t.contract.assumptions()), notes=tuple(search.notes),
        seconds=time.monotonic() - search.t0, confirmations=tuple(search.confirmations))
