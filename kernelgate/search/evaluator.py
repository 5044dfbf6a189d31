"""The evaluator: one candidate through the gate (a fresh worker, a spare started ahead), timed
interleaved with the live baselines, profiled in its worker; the baselines it times against; and the
confirmation of the best at the end of a run (the winner's curse)."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import workload
from ..config import GateConfig, TimingConfig
from ..gate import baselines as baselines_mod
from ..gate import bench as bench_mod
from ..gate import timing
from ..gate.judge import REDUCED_PLAN, Rejected, Session, Task, judge_session
from ..gate.session import prebuilder, spare_options
from ..gate.task import fixed_inputs
from ..profiling import summary
from ..records import Candidate, Evaluation, Status, Timing
from ..sandbox import Spares, isolation
from ..store import Store
from .phases import Phases
from .policy import CONFIRM_ROUNDS, Clock, Planner, SearchConfig, contenders, pace, variant_anchor

JudgeAndTime = Callable[..., Evaluation]     # (candidate, timing, profile, deadline=None) -> Evaluation


class Evaluator:
    """Judges and times candidates of one task. `notes` is the run's list (profiles that fail are noted)."""

    def __init__(self, task: Task, cfg: GateConfig, out_dir: Path, notes: list[str], say: Callable[[str], None],
                 clock: Clock = time.monotonic, phases: Phases | None = None):
        self.task, self.cfg, self.out_dir, self.notes, self.say, self.clock = task, cfg, out_dir, notes, say, clock
        self.phases = phases or Phases(clock)
        self.base_label = ""
        self.timings: dict[str, Timing] = {}
        self.base_sessions: dict[str, Session] = {}
        self.base_insight: dict | None = None       # the faster baseline's profile summary
        self.baseline_check_s = 0.0                   # what building and timing a baseline took
        self.plain_check_s = 0.0                      # the same with the eager baseline's build
        self.baseline_key, self.baseline_emit_s = "", None   # the kept baselines' key; their emitted check's seconds
        self.baseline_emit_kind = ""                  # the baseline to emit when not the faster (gate/baselines.py)
        #: the store keeps the gate's verdict on the module this run would emit from the baseline (optimize checks
        #: the bytes at its start: gate/baselines.verified_emit): its check is then emitting and hashing the file
        self.emit_verified = False
        self.compile_build_s = 0.0                    # what building the compile baseline took (first call in)
        self._baselines: baselines_mod.Baselines | None = None
        self._profile_baseline = False
        self.estimates: dict = {}                     # strategy -> profiling.fusion.FusionEstimate
        self.spares: Spares | None = None             # the next candidate's worker, started ahead

    def start_spares(self) -> None:
        """Start the next candidate's worker (while the baselines build)."""
        with self.phases.timed("spares"):
            self.spares = Spares(**spare_options(self.task, self.cfg))
            self.spares.refill()

    # ------------------------------------------------------------ baselines
    def baselines(self, store: Store, tcfg: TimingConfig, timing_for: Callable[[float], TimingConfig] | None,
                  profile: bool, deadline: Callable[[], float | None] | None = None) -> None:
        """Eager and torch.compile (gate/baselines.py): built and timed side by side, or read from the store;
        only those within 10% of the faster stay alive. The faster one is profiled. `deadline`: when their
        measurement's rounds must end (baselines.ready)."""
        with self.phases.timed("baselines"):
            # the lean memory plan holds one implementation's call at a time: no compile beside the candidates
            b = baselines_mod.ready(self.task, self.cfg, tcfg, store, self.say, self.notes.append, timing_for,
                                    overlap=not self.task.lean, deadline=deadline)
        self._baselines, self._profile_baseline = b, profile
        self._take(b)

    def _take(self, b: baselines_mod.Baselines) -> None:
        self.base_sessions, self.timings, self.base_label = b.sessions, b.timings, b.faster
        self.baseline_check_s = b.check_s
        # the eager baseline's build (this run's or the kept record's) and the faster one's share of the measurement;
        # 0.0 where eager was never built (the planner then takes the faster's figure)
        share = max(b.check_s - float(b.build_s.get(b.faster, 0.0)), 0.0)
        self.plain_check_s = float(b.build_s["eager"]) + share if "eager" in b.build_s else 0.0
        self.baseline_key, self.baseline_emit_kind = b.key, b.emit_kind
        # the emitted check's time in an earlier run, at this run's pace (a loaded machine's is slower)
        self.baseline_emit_s = None if b.emit_s is None else baselines_mod.EMIT_VERIFIED_S if self.emit_verified \
            else b.emit_s * pace(float(getattr(self.task, "admission_s", 0.0) or 0.0), b.emit_admission_s)
        self.compile_build_s = float(b.build_s.get("compile", 0.0))
        if b.pending is None:
            self._profile_faster(self._profile_baseline)

    @property
    def baselines_pending(self) -> bool:
        return self._baselines is not None and self._baselines.pending is not None

    def shares_compile_cache(self) -> bool:
        """Whether the baselines' workers and the emitted check share the trusted compile cache (files confined)."""
        return self.cfg.trusted_cache is not None and isolation.confines_files()

    def baselines_building_s(self) -> float | None:
        """Seconds the background baseline has been building (None: nothing pending; 0.0: built, unmeasured)."""
        return self._baselines.building_s() if self._baselines is not None else None

    def complete_baselines(self, bystanders: tuple[Session, ...] = ()) -> None:
        """The baselines measured, once one building in the background is built (before a candidate is timed
        against them, and before the run ends); `bystanders` (the accepted candidate's worker, waiting) frozen
        meanwhile, so it cannot slow one baseline and not the other."""
        if self.baselines_pending:
            with self.phases.candidate(None), self.phases.timed("baselines"):    # no candidate's time
                self._baselines.complete(bystanders)
            with self.phases.candidate(None):
                self._take(self._baselines)

    def replicate_faster(self, left_s: float) -> None:
        """A second process of the faster baseline, timed beside the first in the confirmation, whose figure then
        counts where it is faster (gate/baselines.py, replicas). Built where its first build's time fits in
        `left_s`."""
        b = self.base_label
        if not b or b not in self.base_sessions or b + baselines_mod.REPLICA in self.base_sessions:
            return
        need = float(self._baselines.build_s.get(b, 0.0)) if self._baselines is not None else 0.0
        if need > left_s:
            self.notes.append(f"the confirmation times {b} in one process: a second one's build ({need:.0f} s) does "
                              f"not fit in the {max(left_s, 0):.0f} s left")
            return
        more = baselines_mod.replicas(self.task, {b: self.base_sessions[b]}, self.cfg, self.say)
        self.base_sessions = {**self.base_sessions, **more}

    def _profile_faster(self, profile: bool) -> None:
        if profile:
            with self.phases.timed("profiling"):
                self.base_insight = summary.try_observe(self.base_sessions[self.base_label], self.notes,
                                                        self.base_label)
            if self.base_insight:
                self.notes.append(f"faster baseline ({self.base_label}): {self.base_insight['bottleneck']}")
                self.say(f"baseline {self.base_label}: {self.base_insight['bottleneck']}")

    def predicted_ms(self) -> dict[str, float]:
        """Strategy -> eager time minus its predicted saving (ms), once the eager baseline is timed."""
        eager = self.timings.get("eager")
        if eager is None:
            return {}
        return {k: max(eager.median_ms - e.predicted_s * 1e3, 1e-6) for k, e in self.estimates.items()}

    def ahead(self, cands: Sequence[Candidate]) -> None:
        """Start the builds of these candidates' literal C++/CUDA extensions (sandbox/prebuild.py), in parallel
        with whatever is judged meanwhile; each candidate's session then takes its builds from there."""
        pb = prebuilder(self.cfg)
        if pb is not None:
            for c in cands:
                pb.ahead(c.source, self.cfg.build_timeout)

    # ------------------------------------------------------------ one candidate
    def judge_and_time(self, c: Candidate, tcfg: TimingConfig, profile: bool, deadline: float | None = None,
                       build_timeout: float | None = None, history: Sequence[Evaluation] = (),
                       variant_trials: int = 0, profile_min: float = 0.0,
                       on_accept: Callable[[], None] | None = None, judge_by: float | None = None,
                       spec: workload.Spec | None = None) -> Evaluation:
        """The gate in a fresh worker, then a measurement interleaved with the live baselines (rounds stop
        at `deadline`, at least 2), then a profile (skipped past the deadline, and below `profile_min` times the
        baseline). The full gate, except for a parametric variant of a family in `history` that passed it
        (policy.variant_anchor): `variant_trials` main trials then, every other check as always.
        `on_accept`: called once the candidate has passed the gate, before it is timed (kernelgate submit
        readies the baselines there, so a rejected candidate costs no baseline build). `judge_by`
        (time.monotonic()): when the judgement must be done; by default `build_timeout` from its start. `spec`: the
        module judged and timed for c, where it is not c's own source (the confirmation's emitted module)."""
        with self.phases.candidate(c.id):
            return self._judge_and_time(c, tcfg, profile, deadline, build_timeout, history, variant_trials,
                                        profile_min, on_accept, judge_by, spec)

    def candidate_path(self, c: Candidate) -> Path:
        """Where a candidate's file is written (and judged from)."""
        return self.out_dir / "candidates" / f"{c.id}.py"

    def trial_plan(self, c: Candidate, history: Sequence[Evaluation], variant_trials: int) -> tuple[int, str]:
        """(main trials, why fewer than the gate's default; "" for the full gate)."""
        if variant_trials <= 0 or variant_trials >= self.cfg.trials:
            return self.cfg.trials, ""
        anchor = variant_anchor(c, history, full_gate)
        if anchor is None:
            return self.cfg.trials, ""
        return variant_trials, (f"a parametric variant (tuning parameters only) of {anchor.candidate.strategy} "
                                f"[{anchor.candidate.id}], which passed the full gate ({self.cfg.trials} main trials)")

    def _judge_and_time(self, c: Candidate, tcfg: TimingConfig, profile: bool, deadline: float | None,
                        build_timeout: float | None, history: Sequence[Evaluation], variant_trials: int,
                        profile_min: float, on_accept: Callable[[], None] | None = None,
                        judge_by: float | None = None, spec: workload.Spec | None = None) -> Evaluation:
        ph = self.phases
        if spec is None:
            path = self.candidate_path(c)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(c.source)
            spec = workload.Spec(str(path.resolve()), workload.CANDIDATE_CLASS)
        # what is left of the budget bounds the build and each call too (a torch.compile candidate compiles on
        # its first call, where only the call's timeout stops it)
        cfg = self.cfg if build_timeout is None else replace(
            self.cfg, build_timeout=build_timeout, call_timeout=min(self.cfg.call_timeout, build_timeout))
        trials, reduced = self.trial_plan(c, history, variant_trials)
        if reduced:
            cfg = replace(cfg, trials=trials)
        # the judgement ends within what is left of the budget too (a big task's trials take seconds each)
        if judge_by is None and build_timeout is not None:
            judge_by = time.monotonic() + build_timeout
        verdict, s = judge_session(self.task, spec, cfg, self.spares, phase=ph.timed, reduced=reduced,
                                   deadline=judge_by)
        ev = Evaluation(c, verdict)
        if verdict.accepted:
            try:
                if on_accept is not None:
                    on_accept()
                self.complete_baselines(bystanders=(s,))
                sessions = {**self.base_sessions, c.id: s}
                # a spread over fewer rounds is wider, so the claim threshold rises with it
                with ph.timed("timing"):
                    timings, rejected = bench_mod.measure(self.task, sessions, self.cfg, tcfg, lambda m: None,
                                                          deadline)
                if c.id in rejected:
                    ev = Evaluation(c, rejected[c.id])
                else:
                    baselines_mod.merge_replicas(timings)      # a baseline's faster process, under its own name
                    base = min((timings[b] for b in self.base_sessions if b in timings), key=lambda t: t.median_ms)
                    sp = timing.speedup(base, timings[c.id], fixed=fixed_inputs(self.task))
                    found = None
                    skip = (f"{sp.ratio:.2f}x, below the {profile_min:.2f}x that a profile needs"
                            if sp.ratio < profile_min else "the search's deadline had passed"
                            if deadline is not None and self.clock() >= deadline else None)
                    if profile and skip:
                        self.notes.append(f"no profile for {c.strategy}: {skip}")
                    elif profile:
                        with ph.timed("profiling"):
                            found = summary.try_observe(s, self.notes, c.strategy)
                    ev = Evaluation(c, verdict, timings[c.id], base, sp, self._with_estimate(c, found, timings[c.id]))
            except Rejected as r:
                ev = Evaluation(c, replace(verdict, status=Status.REJECTED, reason=r.reason,
                                           message=f"{r.check.name}: {r.check.detail.splitlines()[0]}"
                                           if r.check.detail else r.check.name))
            finally:
                with ph.timed("cleanup"):
                    s.worker.close()
        return ev

    def _with_estimate(self, c: Candidate, found: dict[str, Any] | None, measured: Timing) -> dict[str, Any] | None:
        """A single-level candidate of a strategy with a fusion estimate: the prediction next to the
        measurement (a stack's time is no one fusion's to predict)."""
        if len(c.stack) != 1 or c.stack[0].name not in self.estimates:
            return found
        name = c.stack[0].name
        return {**(found or {}), "fusion_estimate": {
            "predicted_ms": self.predicted_ms().get(name), "measured_ms": measured.median_ms,
            "derivation": self.estimates[name].derivation}}

    def close(self) -> None:
        if self._baselines is not None:
            self._baselines.close()
        for s in self.base_sessions.values():
            s.worker.close()
        if self.spares is not None:
            self.spares.close()


def full_gate(e: Evaluation) -> bool:
    """Whether e's verdict came from the full gate (not a reduced trial plan): only such a verdict anchors a
    family (policy.variant_anchor)."""
    return not any(ch.name == REDUCED_PLAN for ch in e.verdict.checks)


# ------------------------------------------------------------------ the confirm step

def confirm(judge_and_time: JudgeAndTime, history: Sequence[Evaluation], planner: Planner, cfg: SearchConfig,
            notes: list[str], say: Callable[[str], None]) -> tuple[Evaluation | None, list[dict[str, Any]]]:
    """Guard against the winner's curse: the fastest of several noisy measurements overstates its
    speedup (a host shared with other work, clock and memory-placement drift between measurements).
    The contenders (policy.contenders: claimed candidates, best first, then unclaimed ones at least NEAR times
    faster in the search) are judged again in a fresh worker and timed afresh,
    interleaved with both baselines (new inputs, new plan); the first whose fresh measurement still claims
    is the result, with the fresh figures. One that does not is reported and not kept; with none confirmed
    the baseline is kept. Returns (the confirmed evaluation or None, each try's record)."""
    tries: list[dict[str, Any]] = []
    budget_s = planner.budget.seconds
    for e in contenders(history)[:cfg.confirm_tries]:
        # the emitted module's own check follows: keep its time too, within the budget plus 10%
        need = planner.confirm_s(e)
        if planner.left() + 0.1 * budget_s < need:
            msg = (f"{e.candidate.strategy}: {e.speedup.ratio:.2f}x in the search, but no time is left to confirm "
                   f"it ({need:.0f} s needed, {max(planner.left(), 0):.0f} s left): not kept")
            notes.append(msg)
            say(msg)
            continue            # the next contender may take less (a stack under compile took 22 s, its base less)
        say(f"confirming {e.candidate.strategy} ({e.speedup.ratio:.2f}x in the search) with a fresh measurement")
        tcfg = cfg.confirm_timing or replace(cfg.timing, rounds=CONFIRM_ROUNDS * cfg.timing.rounds)
        fresh = judge_and_time(e.candidate, tcfg, profile=False,
                               deadline=planner.at(1.05, e.verdict.seconds))
        sp = fresh.speedup
        ok = fresh.accepted and sp is not None and sp.claimed
        tries.append({
            "candidate": e.candidate.id, "strategy": e.candidate.strategy,
            "search_ratio": e.speedup.ratio, "search_ci": [e.speedup.low, e.speedup.high],
            "fresh_ratio": sp.ratio if sp else None, "fresh_ci": [sp.low, sp.high] if sp else None,
            "fresh_threshold": sp.threshold if sp else None,
            "fresh_ms": fresh.timing.median_ms if fresh.timing else None,
            "fresh_baseline_ms": fresh.baseline.median_ms if fresh.baseline else None,
            "verdict": fresh.verdict.status.value if fresh.accepted else
            f"{fresh.verdict.reason.value}: {fresh.verdict.message}", "confirmed": ok})
        if ok:
            say(f"confirmed: {sp.ratio:.2f}x [{sp.low:.2f}, {sp.high:.2f}]")
            return replace(fresh, insight=e.insight), tries
        got = f"{sp.ratio:.2f}x [{sp.low:.2f}, {sp.high:.2f}]" if sp else fresh.verdict.message
        msg = (f"{e.candidate.strategy}: {e.speedup.ratio:.2f}x in the search, but a fresh measurement gave {got}: "
               "not confirmed, not kept")
        notes.append(msg)
        say(msg)
    return None, tries
