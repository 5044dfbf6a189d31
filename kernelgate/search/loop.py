"""The loop: generations of proposals from a population of proposers, each candidate evaluated within the
budget. It knows proposers only through the `Proposer` protocol and evaluations only through a callable:
tests/search/test_search_loop.py runs it with a fake proposer and a fake evaluator."""
from __future__ import annotations

import contextlib
import logging
import random
from dataclasses import replace
from typing import Callable, ContextManager, Sequence

from ..proposers import EXPLORE, RESTART, Context, Proposer, modes_of
from ..records import Candidate, Evaluation
from .policy import Modes, OutOfBudget, Planner, SearchConfig, best, best_ratio, promising

log = logging.getLogger(__name__)


def progress_line(k: int, e: Evaluation, best_now: Evaluation | None) -> str:
    """The line printed after a candidate (kernelgate/report.py words it from the records)."""
    from ..report import progress_line as line
    return line(k, e.to_json(), best_now.to_json() if best_now else None)


def interleave(lists: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """The first of each list, then the second of each, ...; a candidate id once."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for k in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if k < len(x) and x[k].id not in seen:
                seen.add(x[k].id)
                out.append(x[k])
    return out


class Loop:
    """Generations until the budget, the candidate limit or the proposals run out.

    proposers   the population, asked in order each generation for their share (SearchConfig.share)
    evaluate    candidate -> Evaluation (the gate, the measurement; a fake in tests)
    planner     the budget (policy.Planner)
    context     (generation, mode) -> the Context proposers see (the history as it stands)
    history     the run's evaluations so far (appended to)
    record      each evaluation as it is made (the store)
    note        what the result should record (a proposer that failed)
    phase       name -> a context that times that part of the run (phases.Phases.timed: "propose")
    ahead       a generation's candidates, before the first is evaluated (the evaluator starts their
                extensions' builds in parallel: sandbox/prebuild.py)

    A proposer that raises is left out for the rest of the run (noted); the others go on.
    """

    def __init__(self, proposers: Sequence[Proposer], evaluate: Callable[[Candidate], Evaluation],
                 planner: Planner, cfg: SearchConfig, context: Callable[[int, str], Context],
                 history: list[Evaluation], rng: random.Random, say: Callable[[str], None],
                 record: Callable[[Evaluation], None] = lambda ev: None,
                 note: Callable[[str], None] = lambda m: None,
                 phase: Callable[[str], ContextManager] = lambda name: contextlib.nullcontext(),
                 ahead: Callable[[Sequence[Candidate]], None] = lambda cs: None):
        self.proposers, self.evaluate, self.planner, self.cfg = list(proposers), evaluate, planner, cfg
        self.phase, self.ahead = phase, ahead
        self.context, self.history, self.rng, self.say, self.record = context, history, rng, say, record
        self.note = note
        self.propose_s: dict[str, float] = {}       # proposer name -> seconds its last proposal took
        self.skipped: set[str] = set()              # proposers left out for time (said once)

    def run(self) -> None:
        """Raises OutOfBudget when the budget (or the candidate limit) ends it; returns when no proposer has
        anything left."""
        generation = max((e.candidate.generation for e in self.history), default=-1) + 1
        modes = Modes(self.cfg, best_ratio(self.history))
        empty = 0
        while True:
            self.planner.check(self.history)
            mode = modes.mode(generation, promising(self.history, self.cfg))
            props = self.propose(generation, mode)
            if props is None:
                raise OutOfBudget                   # no proposer's proposal fits in what is left
            if not props:
                # a proposer without modes (a model) may have nothing this time and something the next
                empty += 1
                if empty >= self.cfg.empty_generations or not any(
                        not modes_of(p) and not getattr(p, "stopped", None) for p in self.proposers):
                    self.say("no more candidates to try")
                    return
                generation += 1
                continue
            empty = 0
            tried = 0
            self.ahead(props)                       # builds that can start before their turn (extensions)
            for c in props:
                self.planner.check(self.history)
                expected = self.planner.expected_s(c, self.history)
                if not self.planner.fits(expected, self.history):
                    self.say(f"skipped {c.strategy}: candidates of its kind took {expected:.0f} s here, "
                             f"{self.planner.left():.0f} s left")
                    continue
                self.one(c)
                tried += 1
            if not tried:
                raise OutOfBudget
            if modes.after(best_ratio(self.history)):
                self.say(f"generation {generation}: no improvement for {modes.stale} generations; "
                         "restarting from the reference")
            generation += 1

    def one(self, c: Candidate) -> Evaluation:
        t0 = self.planner.clock()
        ev = self.evaluate(c)
        self.record(ev)
        self.history.append(ev)
        self.planner.record(c.id, self.planner.clock() - t0)
        self.say(progress_line(len(self.history), ev, best(self.history)))
        return ev

    def propose(self, generation: int, mode: str) -> list[Candidate] | None:
        """Each proposer's share for this generation, interleaved (None: every proposer was left out because
        its last proposal took longer than what is left)."""
        ctx = self.context(generation, mode)
        tried = ctx.tried()
        lists, asked = [], 0
        for p in list(self.proposers):
            took = self.propose_s.get(p.name, 0.0)
            if took and not self.planner.fits(took + self.planner.avg_s(), self.history):
                if p.name not in self.skipped:
                    self.skipped.add(p.name)
                    self.say(f"proposer {p.name} not asked: its last proposal took {took:.0f} s, "
                             f"{self.planner.left():.0f} s left")
                continue
            asked += 1
            t0 = self.planner.clock()
            try:
                with self.phase("propose"):
                    got = self.ask(p, ctx, self.cfg.share(p.name))
            except Exception as e:  # noqa: BLE001 - one proposer's failure is not the run's
                log.exception("proposer %s failed", p.name)
                msg = f"proposer {p.name} failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): " \
                      "not asked again in this run"
                self.note(msg)
                self.say(msg)
                self.proposers.remove(p)
                continue
            self.propose_s[p.name] = self.planner.clock() - t0
            lists.append([c for c in got if c.id not in tried])
        return interleave(lists) if asked else None

    def ask(self, p: Proposer, ctx: Context, n: int) -> list[Candidate]:
        """Up to n candidates of `p`. A proposer that lists its modes is asked in the search's mode where it
        lists it ("restart" is "explore" where it lists no "restart"), and, with nothing there, once in each
        other mode it lists; one without modes is asked once, ctx.mode a hint."""
        if n <= 0:
            return []
        modes = modes_of(p)
        if not modes:
            return list(p.propose(ctx, self.rng, n))
        first = ctx.mode if ctx.mode in modes else EXPLORE if ctx.mode == RESTART and EXPLORE in modes else modes[0]
        for mode in [first] + [m for m in modes if m != first]:
            got = p.propose(ctx if mode == ctx.mode else replace(ctx, mode=mode), self.rng, n)
            if got:
                return list(got)
        return []
