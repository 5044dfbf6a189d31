"""The search: baselines first, then generations of proposals from a population of proposers, every
candidate through the gate, within a budget.

    policy.py     the budget on an injected clock, the modes (explore / refine / restart), cost priors,
                  the incumbent; no gate in it
    evaluator.py  one candidate: judged, timed interleaved with the baselines, profiled; the baselines;
                  the confirm step
    phases.py     where the run's time goes: seconds per phase and per candidate (result.json "phases")
    loop.py       generations over the proposers, known only through the `Proposer` protocol
    Search        (here) one run: the graph analysis and fusion estimates it is given, the context
                  proposers see, the parts wired together; `finalize` makes the result

The population lives in the store (table `candidates`, keyed by run id), so an interrupted run resumes
without re-evaluating finished candidates. The faster baseline is always the incumbent: a candidate
becomes best only with a claimed speedup over it.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import GateConfig, TimingConfig
from ..gate.judge import Task, device_name
from ..graph import GraphInfo
from ..profiling import summary
from ..proposers import EXPLORE, Context, Proposer
from ..records import Candidate, Evaluation, OptimizeResult
from ..store import Store
from ..versions import conditions
from . import evaluator as evaluator_mod
from .evaluator import Evaluator
from .loop import Loop, progress_line
from .phases import Phases
from .policy import (EMIT_OVER_BASELINE, contender, contenders, EMIT_OVER_BASELINE_CACHED, PLAN_SHARE, Budget, Clock,
                     OVERRUN, OutOfBudget, Planner, SearchConfig, best, cost_kind, emit_over_admission)

__all__ = ["Budget", "OutOfBudget", "PLAN_SHARE", "Search", "SearchConfig", "finalize", "progress_line"]

log = logging.getLogger(__name__)

#: (the reference model, the aten ops it ran) -> what proposers see of its graph (graph.analyse with the
#: library's rewrites counted)
Analyse = Callable[[Any, Any], GraphInfo]


#: phases of a candidate's evaluation that confirming it does not repeat (a wait for the baselines is no
#: candidate's phase: Evaluator.complete_baselines times it outside any candidate)
NOT_AGAIN = ("profiling",)


class Search:
    """One optimize run: `run()` (raises OutOfBudget when the budget ends it), `confirm()`, `close()`;
    then `finalize(search)`."""

    def __init__(self, task: Task, run_id: str, out_dir: Path, budget: Budget, seed: int, cfg: GateConfig,
                 scfg: SearchConfig, store: Store, say: Callable[[str], None], *, proposers: Sequence[Proposer],
                 analyse: Analyse, fusion_source: Any = None, clock: Clock = time.monotonic,
                 languages: Sequence[str] = ()):
        self.task, self.run_id, self.out_dir, self.budget = task, run_id, out_dir, budget
        self.languages = tuple(languages)             # Context.languages: () the target's defaults
        self.cfg, self.scfg, self.store, self.say = cfg, scfg, store, say
        self.proposers = list(proposers)
        self.analyse, self.fusion_source = analyse, fusion_source
        self.rng = random.Random(seed)
        self.history: list[Evaluation] = [Evaluation.from_json(d) for d in store.evaluations(run_id)]
        self.notes: list[str] = []
        self.planner = Planner(budget, clock)
        self.phases = Phases(clock)                   # where the time goes (api.optimize adds prepare, the emitted check)
        self.evaluator = Evaluator(task, cfg, out_dir, self.notes, say, clock, self.phases)
        self.graph: GraphInfo | None = None
        self.machine: dict[str, Any] = {}               # targets.Machine of the device, as a dict
        self.confirmed: Evaluation | None = None      # the best after confirm(), with its fresh measurement
        self.confirmations: list[dict] = []           # each confirmation tried: search vs fresh figures
        self.confirm_ran = False
        #: where set (optimize's), the confirmation judges and times the module emitted from a contender: this writes
        #: it (optimized.py) and returns its spec; `emitted_for` is then the candidate whose module the file holds
        self.emit_for: Callable[[Candidate], Any] | None = None
        self.emitted_for: str | None = None

    # what finalize and the API read
    @property
    def t0(self) -> float:
        return self.planner.t0

    @property
    def timings(self):
        return self.evaluator.timings

    @property
    def base_label(self) -> str:
        return self.evaluator.base_label

    @property
    def base_insight(self) -> dict | None:
        return self.evaluator.base_insight

    def best(self) -> Evaluation | None:
        return best(self.history)

    # ------------------------------------------------------------ the run
    def run(self) -> None:
        with self.phases.timed("analysis"):
            self._analyse()
        self.evaluator.start_spares()                 # starts while the baselines build
        self.baselines()
        if self.planner.left() <= self.planner.reserve_s(contender(self.history)):
            msg = (f"the budget ({self.budget.seconds:.0f} s) was used up by the baselines (and the time kept for "
                   "the check of the emitted module); no candidate was tried (give a larger --budget)")
            self.notes.append(msg)
            self.say(msg)
            raise OutOfBudget
        self.planner.check(self.history)
        # a resumed run: proposers rebuild what they build on (the library's stacks, from Candidate.stack)
        for p in self.proposers:
            restore = getattr(p, "restore", None)
            if restore is not None and self.history:
                with self.phases.timed("propose"):
                    restore(self.context(), [e.candidate for e in self.history])
        try:
            Loop(self.proposers, self.evaluate, self.planner, self.scfg, self.context, self.history, self.rng,
                 self.say, lambda ev: self.store.add_evaluation(self.run_id, ev), self.notes.append,
                 phase=self.phases.timed, ahead=self.evaluator.ahead).run()
        except OutOfBudget:
            if not self.history:        # a run that tried nothing says why (a loaded run ended so, unexplained)
                msg = (f"no candidate was tried: {max(self.planner.left(), 0):.0f} s of the budget were left to plan "
                       f"with, and the end of the run keeps {self.planner.reserve_s(None):.0f} s (measuring a "
                       "baseline still building, the check of the emitted module; give a larger --budget)")
                self.notes.append(msg)
                self.say(msg)
            raise
        finally:
            self.complete_baselines()

    def _analyse(self) -> None:
        """The reference's graph, the machine model, the fusion estimates."""
        self.graph = self.analyse(self.task.oracle.model, self.task.oracle.ops)
        if not self.graph.traced:
            self.notes.append(self.graph.note)
        else:
            applied = {k: v for k, v in self.graph.patterns.items() if v}
            where = ", ".join(f"{k} ({v} place{'s' if v > 1 else ''})" for k, v in applied.items())
            self.notes.append(f"graph: {self.graph.summary()}; rewrites that apply: {where or 'none'}; "
                              "every other op is left as the reference wrote it (runtime configurations only)")
        machine = self._machine()
        self.fusion_estimates(machine)

    def baselines(self) -> None:
        """Eager and torch.compile, built and timed side by side or read from the store. Building them counts
        against the budget: past half of it, they are measured with 2 rounds."""
        def timing_for(build_s: float) -> TimingConfig:
            tcfg = self.scfg.timing
            if self.planner.left() < 0.5 * self.budget.seconds and tcfg.rounds > 2:
                msg = (f"building the baselines took {build_s:.0f} s of the {self.budget.seconds:.0f} s "
                       f"budget: measuring them with 2 rounds instead of {tcfg.rounds} (their figures are kept in the "
                       "store, so the next run of this workload spends its budget on candidates)")
                self.notes.append(msg)
                self.say(msg)
                tcfg = replace(tcfg, rounds=2)
            return tcfg
        # their measurement's rounds (past the first two) end where the time kept for the end of the run begins
        self._sync_task()
        self.evaluator.baselines(self.store, self.scfg.timing, timing_for, self.scfg.profile,
                                 deadline=lambda: self.planner.at(PLAN_SHARE, self.planner.reserve_s(None)))
        self._sync_baselines()

    def complete_baselines(self) -> None:
        """A baseline building in the background (the compile baseline's first run) built and measured."""
        self.evaluator.complete_baselines()
        self._sync_baselines()

    def _sync_task(self) -> None:
        """The planner's view of the task: what admission's trials took, a move of its inputs (the lean plan on a
        GPU), the emitted check's ratio to admission on this device."""
        self.planner.admission_s = float(getattr(self.task, "admission_s", 0.0) or 0.0)
        self.planner.crossing_s = float(getattr(self.task, "crossing_s", 0.0) or 0.0)
        self.planner.lean_gpu = bool(getattr(self.task, "lean", False)) and str(self.task.device).startswith("cuda")
        self.planner.emit_over_admission = emit_over_admission(self.task.device)

    def _sync_baselines(self) -> None:
        """The planner's view of the baselines; a background baseline that finished building is measured now
        (no candidate is alive between evaluations), so the time kept for the end of the run is its own."""
        if self.evaluator.baselines_building_s() == 0.0:
            self.evaluator.complete_baselines()
        self.planner.baseline_check_s = self.evaluator.baseline_check_s
        self.planner.plain_check_s = self.evaluator.plain_check_s
        self.planner.baseline_emit_s = self.evaluator.baseline_emit_s
        self.planner.compile_build_s = self.evaluator.compile_build_s
        self._sync_task()
        self.planner.emit_over_baseline = EMIT_OVER_BASELINE_CACHED if self.evaluator.shares_compile_cache() \
            else EMIT_OVER_BASELINE
        self.planner.pending_s = self.evaluator.baselines_building_s

    def evaluate(self, c: Candidate) -> Evaluation:
        """Gate, then time against the live baselines, interleaved (rounds stop where the time kept for the
        end of the run begins). A parametric variant of a family that passed the full gate gets fewer main
        trials (SearchConfig.variant_trials; docs/GATE.md "Parametric variants"); a candidate slower than
        SearchConfig.profile_min is not profiled. A candidate that compiles waits for a baseline still compiling
        in the background (two compilers on a small machine: a 60 s CPU run took 101 s), and is left out when what
        is left of the budget then no longer fits it."""
        if self.evaluator.baselines_pending and cost_kind(c) == "runtime:compile":
            self.say(f"{c.strategy}: waiting for the compile baseline to finish building first")
            self.complete_baselines()
            self.planner.check(self.history)
            if not self.planner.fits(self.planner.expected_s(c, self.history), self.history):
                raise OutOfBudget
        deadline = self.planner.at(PLAN_SHARE, self.planner.reserve_s(contender(self.history)))
        ev = self._judge_and_time(c, self.scfg.timing, profile=self.scfg.profile, deadline=deadline,
                                  history=self.history, profile_min=min(self.scfg.profile_min,
                                                                        self.scfg.promising_host), confirming=False)
        own = self.phases.per_candidate.get(c.id)
        if own:
            self.planner.again[c.id] = sum(s for name, s in own.items() if name not in NOT_AGAIN)
            self.planner.timing_s[c.id] = own.get("timing", 0.0)
        return ev

    def _judge_and_time(self, c: Candidate, tcfg: TimingConfig, profile: bool, deadline: float | None = None,
                        history: Sequence[Evaluation] = (), profile_min: float = 0.0,
                        confirming: bool = True) -> Evaluation:
        """The confirmation calls this as it is (`confirming`: the full gate, always); the search's evaluations with
        `confirming=False` and their history."""
        # a build cannot run past what is left of the budget (torch.compile's autotuning can take minutes); a
        # confirmation's may take what is left of the promise less what would follow a failed one (the baseline's
        # module's check): the time kept for the end of the run is its own (counting it again cut every confirmation's
        # build to the 10 s floor, and rejected a candidate whose build had taken longer in the search: red team 53)
        if confirming:
            after = self.planner.baseline_emit_estimate() if self.planner.emit_confirms else 0.0
            room = self.planner.left() + 0.1 * self.planner.budget.seconds - after
        else:
            room = self.planner.left() - self.planner.reserve_s(contender(self.history))
        build = max(10.0, min(self.cfg.build_timeout, room))
        # the judgement within that too; a confirmation spends the time kept for it, up to the promise (the budget
        # plus 10%). A search's first candidate has an empty history and is no confirmation: judged by the promise,
        # it ran into the time kept for the end of the run (a 90 s budget took 133-142 s on a loaded CPU)
        judge_by = self.planner.at(OVERRUN) if confirming else None
        spec = None
        if confirming and self.emit_for is not None:     # the file a user imports, through the class they import
            spec = self.emit_for(c)
            self.emitted_for = c.id
        try:
            return self.evaluator.judge_and_time(c, tcfg, profile, deadline, build, history,
                                                 0 if confirming else self.scfg.variant_trials, profile_min,
                                                 judge_by=judge_by, spec=spec)
        finally:
            self._sync_baselines()

    def confirm(self) -> None:
        """The contenders (the best claimed candidates, then near claims) judged and timed afresh (evaluator.confirm)."""
        self.confirm_ran = True
        self.complete_baselines()
        with self.phases.timed("confirmation", collapse=True):
            first = next(iter(contenders(self.history)[:self.scfg.confirm_tries]), None)
            if first is not None:
                self.evaluator.replicate_faster(self.planner.left() + 0.1 * self.planner.budget.seconds
                                                - self.planner.confirm_s(first))
            self.confirmed, self.confirmations = evaluator_mod.confirm(
                self._judge_and_time, self.history, self.planner, self.scfg, self.notes, self.say)
        if self.emit_for is not None:                    # which tries judged the emitted module
            self.confirmations = [dict(t, module="optimized.py") for t in self.confirmations]

    def emitted_confirmed(self) -> bool:
        """Whether the emitted module on disk is the confirmed candidate's and its confirmation was the gate's
        check of that module (judged and timed through the class a user imports): no second check is needed."""
        c = self.confirmed               # set only by a try whose fresh judgement and timing claimed
        return self.emit_for is not None and c is not None and self.emitted_for == c.candidate.id

    def context(self, generation: int = 0, mode: str = EXPLORE) -> Context:
        t = self.task
        ev = self.evaluator
        base = ev.timings.get(ev.base_label) if ev.base_label else None
        return Context(Path(t.ref.spec.path).read_text(), t.ref.spec.cls, "cuda" if t.device.startswith("cuda")
                       else "cpu", device_name(t.device), t.contract, self.graph, tuple(self.history), self.machine,
                       baseline_ms=base.median_ms if base else None, predicted_ms=ev.predicted_ms(),
                       generation=generation, mode=mode, languages=self.languages, bound=self._bound())

    def _bound(self) -> str:
        """The faster baseline's bottleneck: its profile's, else the one its graph and floor lead one to expect."""
        seen = self.base_insight
        if seen and seen.get("bound"):
            return str(seen["bound"])
        g = self.graph
        if not self.machine or g is None or not g.traced or not self.task.device.startswith("cuda"):
            return ""
        from ..profiling import bottleneck
        sites = len(g.modules) + len(g.functions) + len(g.methods)
        return bottleneck.expected(getattr(self.task, "floor", None), sites, self.machine.get("launch_overhead_s"))

    def _machine(self):
        """The device's machine model (Context.machine holds it as a dict); None when it cannot be read."""
        from .. import targets
        try:
            m = targets.machine(self.task.device)
        except Exception as e:  # noqa: BLE001 - proposers work without it
            self.notes.append(f"no machine model: {type(e).__name__}: {e}")
            return None
        self.machine = dataclasses.asdict(m)
        return m

    def fusion_estimates(self, machine) -> None:
        """What each generated-kernel strategy would save on this machine: what the proposer's `fusion_source`
        says each fuses, priced by profiling/fusion.py, from the reference's graph on meta tensors; recorded
        next to each single-level candidate's measurement."""
        if self.fusion_source is None or machine is None:
            return
        if getattr(self.task.oracle, "own", False):    # kernels handed meta tensors would fault
            self.notes.append("no fusion estimates: the reference launches its own kernels")
            self.evaluator.estimates = {}
            return
        from ..profiling import fusion
        from ..structure import structured
        import torch
        try:
            try:        # built on the meta device: no copy of the weights
                with torch.device("meta"):
                    model = structured(self.task.ref.cls(*self.task.ref.init_inputs).eval(), self.task.shape)
            except Exception:  # noqa: BLE001 - a constructor that needs real tensors: copy the reference
                model = self.task.oracle.model
            self.evaluator.estimates = fusion.strategy_estimates(self.fusion_source, model, self.task.given, machine)
        except Exception as e:  # noqa: BLE001 - an estimate is a hint; the search runs without it
            self.notes.append(f"no fusion estimates: {type(e).__name__}: {e}")
            self.evaluator.estimates = {}

    def phases_json(self) -> dict:
        """The phases (Phases.to_json) and each take of a spare worker (sandbox/spares.py `takes`: whether one was
        ready, its prime done, how long it was waited for), which says where "worker start" went."""
        sp = self.evaluator.spares
        return {**self.phases.to_json(), "spare_takes": list(sp.takes) if sp is not None else []}

    def close(self) -> None:
        with self.phases.timed("cleanup"):
            self.evaluator.close()


def finalize(search: Search) -> OptimizeResult:
    """The result: the best candidate (timed interleaved with both baselines), or the faster baseline."""
    t = search.task
    best_ev = search.confirmed if search.confirm_ran else search.best()
    eager, compiled = search.timings.get("eager"), search.timings.get("compile")
    # fingerprint distance of every profiled candidate to the best one (or to the kept baseline)
    anchor = best_ev.insight if best_ev is not None else search.base_insight
    history = tuple(replace(e, insight={**e.insight, "distance_to_best": summary.distance(e.insight, anchor)})
                    if e.insight else e for e in search.history)
    best_ev = next((h for h, e in zip(history, search.history) if e is best_ev), best_ev)
    if best_ev is not None and best_ev.insight and anchor is not None:
        best_ev = replace(best_ev, insight={**best_ev.insight, "distance_to_best": 0.0})
    if best_ev is not None:
        base = best_ev.baseline
        base_label = base.label
        base_ms, best_ms, final = base.median_ms, best_ev.timing.median_ms, best_ev.speedup
    else:
        base_label = search.base_label
        base_ms = best_ms = search.timings[base_label].median_ms
        final = None
    return OptimizeResult(
        workload=t.ref.spec.path, target=t.target, device=device_name(t.device), baseline_kind=base_label,
        baseline_ms=base_ms, eager=eager, compiled=compiled, best=best_ev, final=final, best_ms=best_ms,
        evaluations=history, conditions=conditions(t.device),
        contract=tuple(t.contract.assumptions()), notes=tuple(search.notes),
        seconds=search.planner.elapsed(), confirmations=tuple(search.confirmations), phases=search.phases_json(),
        floor=t.floor.to_json() if getattr(t, "floor", None) is not None else None)
