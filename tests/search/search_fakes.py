"""Fakes for the search tests: a clock, evaluations, a proposer and an evaluator that need no gate."""
from __future__ import annotations

from kernelgate.graph import GraphInfo
from kernelgate.proposers import Context
from kernelgate.records import (Candidate, Contract, Evaluation, Level, Reason, Speedup, Status, Timing,
                                Verdict)

OK = Verdict(Status.ACCEPTED, Reason.OK, "ok")


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def timed(name: str, ratio: float, claimed: bool = True, insight: dict | None = None, stack=()) -> Evaluation:
    """An accepted evaluation of candidate `name`, `ratio` times faster than a 1 ms baseline."""
    return Evaluation(Candidate(name, name, "", stack=tuple(stack)), OK,
                      Timing(name, (1 / ratio,), 1 / ratio, 1 / ratio, 0.0), Timing("compile", (1.0,), 1.0, 1.0, 0.0),
                      Speedup(ratio, ratio - 0.01, ratio + 0.01, 1.05, claimed), insight)


class FakeProposer:
    """Proposes from fixed lists per mode (ids not tried yet), and records what it was asked."""

    def __init__(self, name: str, by_mode: dict[str, list[str]], modes: tuple[str, ...] = (), cost_s: float = 0.0,
                 clock: FakeClock | None = None):
        self.name, self.by_mode, self.cost_s, self.clock = name, by_mode, cost_s, clock
        if modes:
            self.modes = modes
        self.asked: list[tuple[int, str, int]] = []

    def propose(self, ctx: Context, rng, n: int) -> list[Candidate]:
        self.asked.append((ctx.generation, ctx.mode, n))
        if self.clock is not None:
            self.clock.t += self.cost_s             # a proposal that takes time (a model's reply)
        tried = ctx.tried()
        ids = [i for i in self.by_mode.get(ctx.mode, []) if i not in tried][:n]
        return [Candidate(i, f"{self.name}:{i}", f"# {i}", generation=ctx.generation, proposer=self.name,
                          stack=(Level(f"{self.name}:{i.split('-')[0]}"),)) for i in ids]


class FakeEvaluator:
    """candidate id -> (ratio, accepted, seconds it takes on the fake clock)."""

    def __init__(self, clock: FakeClock, table: dict[str, tuple[float, bool, float]], default=(1.0, True, 1.0)):
        self.clock, self.table, self.default = clock, table, default
        self.seen: list[Candidate] = []

    def __call__(self, c: Candidate) -> Evaluation:
        self.seen.append(c)
        ratio, ok, seconds = self.table.get(c.id, self.default)
        self.clock.t += seconds
        if not ok:
            return Evaluation(c, Verdict(Status.REJECTED, Reason.MISMATCH, "wrong"))
        t = Timing(c.id, (1 / ratio,), 1 / ratio, 1 / ratio, 0.0)
        return Evaluation(c, OK, t, Timing("eager", (1.0,), 1.0, 1.0, 0.0),
                          Speedup(ratio, ratio * 0.99, ratio * 1.01, 1.05, ratio * 0.99 > 1.05))


def context_of(history: list[Evaluation]):
    def context(generation: int, mode: str) -> Context:
        return Context("", "Model", "cpu", "fake", Contract(), GraphInfo(True), tuple(history), {},
                       generation=generation, mode=mode)
    return context
