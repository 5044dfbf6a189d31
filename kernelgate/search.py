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

import torch

from . import workload
from .config import GateConfig, TimingConfig
from .gate import bench as bench_mod
from .gate.judge import Rejected, Session, Task, device_name, judge
from .gate import timing
from .graph import analyse
from .proposers import Context
from .proposers.library import Library
from .proposers.library.fx_rewrites import REWRITES
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
    per_generation: int = 4
    patience: int = 2                     # generations without improvement before a restart
    timing: TimingConfig = TimingConfig(warmup_ms=200.0, rounds=5, iters=10)
    final_timing: TimingConfig = TimingConfig(warmup_ms=300.0, rounds=10, iters=10)


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
        self.base_session: Session | None = None

    # ------------------------------------------------------------ budget
    def left(self) -> float:
        return self.budget.seconds - (time.monotonic() - self.t0)

    def check_budget(self) -> None:
        if self.left() <= 0 or len(self.history) >= self.budget.candidates:
            raise OutOfBudget

    # ------------------------------------------------------------ baselines
    def baselines(self) -> None:
        """Build eager and torch.compile workers and time them side by side; keep the faster one alive."""
        sessions: dict[str, Session] = {}
        ref = self.task.ref.spec
        for name in bench_mod.BASELINES:
            s = Session(self.task, workload.Spec(ref.path, ref.cls), self.cfg, name, trusted=True)
            try:
                self.say(f"baseline {name}: building")
                s.build(compile_options={} if name == "compile" else None, baseline=True)
                sessions[name] = s
            except Rejected as r:
                s.worker.close()
                self.notes.append(f"baseline {name} unavailable: {r.check.detail.splitlines()[0]}")
        if not sessions:
            raise RuntimeError("no baseline could be built")
        self.timings, _ = bench_mod.measure(self.task, sessions, self.cfg, self.scfg.timing, lambda m: None)
        self.base_label = min(self.timings, key=lambda k: self.timings[k].median_ms)
        for name, s in sessions.items():
            if name == self.base_label:
                self.base_session = s
            else:
                s.worker.close()
        b = self.timings[self.base_label]
        self.say(f"baselines: " + ", ".join(f"{k} {t.median_ms:.4g} ms" for k, t in self.timings.items())
                 + f"; faster: {self.base_label}")

    # ------------------------------------------------------------ evaluation
    def evaluate(self, c: Candidate) -> Evaluation:
        """Gate, then time against the faster baseline, interleaved; record in the store."""
        path = self.out_dir / "candidates" / f"{c.id}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(c.source)
        spec = workload.Spec(str(path.resolve()), workload.CANDIDATE_CLASS)
        verdict = judge(self.task, spec, self.cfg)
        ev = Evaluation(c, verdict)
        if verdict.accepted:
            s = Session(self.task, spec, self.cfg, c.id)
            try:
                s.build()
                assert self.base_session is not None
                sessions = {self.base_label: self.base_session, c.id: s}
                timings, rejected = bench_mod.measure(self.task, sessions, self.cfg, self.scfg.timing, lambda m: None)
                if c.id in rejected:
                    ev = Evaluation(c, rejected[c.id])
                else:
                    ev = Evaluation(c, verdict, timings[c.id], timings[self.base_label],
                                    timing.speedup(timings[self.base_label], timings[c.id]))
            except Rejected as r:
                ev = Evaluation(c, replace(verdict, status=Status.REJECTED, reason=r.reason,
                                           message=f"{r.check.name}: {r.check.detail.splitlines()[0]}"))
            finally:
                s.worker.close()
        self.store.add_evaluation(self.run_id, ev)
        self.history.append(ev)
        self.say(progress_line(len(self.history), ev, self.best()))
        return ev

    def best(self) -> Evaluation | None:
        """The fastest candidate with a claimed speedup over the baseline it was timed against."""
        good = [e for e in self.history if e.accepted and e.speedup is not None and e.speedup.claimed]
        return max(good, key=lambda e: e.speedup.ratio) if good else None

    def context(self) -> Context:
        t = self.task
        return Context(Path(t.ref.spec.path).read_text(), t.ref.spec.cls, "cuda" if t.device.startswith("cuda")
                       else "cpu", device_name(t.device), t.contract, self.graph, tuple(self.history), {})

    # ------------------------------------------------------------ loop
    def run(self) -> None:
        self.graph = analyse(self.task.oracle.model, self.task.oracle.ops, REWRITES)
        if not self.graph.traced:
            self.notes.append(self.graph.note)
        self.baselines()
        self.check_budget()
        generation = max((e.candidate.generation for e in self.history), default=-1) + 1
        stale, best_ratio = 0, self._best_ratio()
        # rebuild the library's stacks for candidates evaluated before a resume
        self.library.propose(self.context(), random.Random(0), 10 ** 6, generation=0, mode="explore")
        while True:
            self.check_budget()
            ctx = self.context()
            mode = "explore" if generation == 0 or stale >= self.scfg.patience or generation % 2 == 0 else "refine"
            props = self.library.propose(ctx, self.rng, self.scfg.per_generation, generation, mode)
            if not props:
                other = "refine" if mode == "explore" else "explore"
                props = self.library.propose(ctx, self.rng, self.scfg.per_generation, generation, other)
            if not props:
                self.say("no more candidates to try")
                return
            for c in props:
                self.check_budget()
                self.evaluate(c)
            ratio = self._best_ratio()
            stale = 0 if ratio > best_ratio else stale + 1
            if stale >= self.scfg.patience:
                self.say(f"generation {generation}: no improvement for {stale} generations; restarting from the reference")
            best_ratio = max(best_ratio, ratio)
            generation += 1

    def _best_ratio(self) -> float:
        b = self.best()
        return b.speedup.ratio if b else 1.0

    def close(self) -> None:
        if self.base_session is not None:
            self.base_session.worker.close()


def progress_line(k: int, e: Evaluation, best: Evaluation | None) -> str:
    if e.accepted and e.timing and e.speedup:
        status = f"{e.timing.median_ms:8.4g} ms  {e.speedup.ratio:5.2f}x  " + ("ok " if e.speedup.claimed else "ok~")
    elif e.accepted:
        status = "accepted, untimed"
    else:
        status = f"REJECTED {e.verdict.reason.value}"
    b = f"  | best {best.speedup.ratio:.2f}x" if best and best.speedup else "  | best: baseline"
    return f"[{k}] {e.candidate.strategy:<52} {status}{b}"


def finalize(search: Search, cands_dir: Path, tcfg: TimingConfig) -> OptimizeResult:
    """Re-measure the best candidate against both baselines side by side in fresh processes."""
    t = search.task
    best = search.best()
    final = None
    eager = search.timings.get("eager")
    compiled = search.timings.get("compile")
    base_label, base_ms, best_ms = search.base_label, search.timings[search.base_label].median_ms, 0.0
    if best is not None:
        spec = workload.Spec(str((cands_dir / f"{best.candidate.id}.py").resolve()), workload.CANDIDATE_CLASS)
        search.say(f"confirming the best ({best.candidate.strategy}) against eager and torch.compile")
        res = bench_mod.bench(t, [spec], search.cfg, tcfg)
        rows = {r.label: r for r in res.rows}
        cand_row = next((r for r in res.rows if r.label not in bench_mod.BASELINES), None)
        eager = rows["eager"].timing if "eager" in rows and rows["eager"].timing else eager
        compiled = rows["compile"].timing if "compile" in rows and rows["compile"].timing else compiled
        base_label = res.baseline or base_label
        if cand_row is not None and cand_row.speedup is not None and cand_row.speedup.claimed:
            final = cand_row.speedup
            base_ms = rows[base_label].timing.median_ms
            best_ms = cand_row.timing.median_ms
        else:
            why = cand_row.note if cand_row is not None else "not timed"
            search.notes.append(f"the best candidate ({best.candidate.strategy}) did not hold its speedup when "
                                f"re-measured against both baselines ({why or 'no claimable speedup'}); "
                                "the baseline is kept")
            best = None
            if "eager" in rows or "compile" in rows:
                base_ms = rows[base_label].timing.median_ms
    if best is None:
        best_ms = base_ms
    return OptimizeResult(
        workload=t.ref.spec.path, target=t.target, device=device_name(t.device), baseline_kind=base_label,
        baseline_ms=base_ms, eager=eager, compiled=compiled, best=best, final=final, best_ms=best_ms,
        evaluations=tuple(search.history), conditions=conditions(t.device),
        contract=tuple(t.contract.assumptions()), notes=tuple(search.notes),
        seconds=time.monotonic() - search.t0)
