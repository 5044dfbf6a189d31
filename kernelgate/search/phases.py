"""Where an optimize run's time goes: seconds per phase (prepare, baselines, worker start, build, trials, ...)
and per candidate, on the search's one clock (time.monotonic in a run, a fake in tests).

Phases nest; each second goes to the innermost phase open at the time (a baseline's profile counts as
profiling, not as baselines). A collapsing phase (the confirmation) keeps everything inside it: its nested
phases are not split out. What no phase covers is the run's `unaccounted_s` (the proposers' bookkeeping,
store writes, progress lines); the phases and it sum to `total_s`.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

Clock = Callable[[], float]

#: the phases in the order a run meets them (the summary line and benchmarks/throughput.py print this order)
ORDER = ("prepare", "analysis", "baselines", "spares", "worker start", "build", "trials", "re-check", "timing",
         "profiling", "propose", "cleanup", "confirmation", "emitted check")


class Phases:
    """Seconds per phase on `clock`; `timed(name)` around each piece of work, `candidate(id)` around one
    candidate's evaluation (its phases are also kept per candidate)."""

    def __init__(self, clock: Clock = time.monotonic):
        self.clock = clock
        self.t0 = clock()
        self.seconds: dict[str, float] = {}
        self.per_candidate: dict[str, dict[str, float]] = {}
        self._stack: list[list] = []          # [name, started, seconds of nested phases]
        self._collapsed = 0
        self._current: str | None = None

    def since(self, t0: float, name: str) -> None:
        """The run began at `t0` on this clock; the time until now was `name` (the preparation before the
        search was made)."""
        self.add(name, self.clock() - t0)
        self.t0 = t0

    def add(self, name: str, seconds: float) -> None:
        if seconds <= 0:
            return
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        if self._current is not None:
            own = self.per_candidate.setdefault(self._current, {})
            own[name] = own.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def timed(self, name: str, collapse: bool = False) -> Iterator[None]:
        """Time the block as `name` (less its nested phases); with `collapse`, nested phases count as `name`."""
        if self._collapsed:
            yield
            return
        frame = [name, self.clock(), 0.0]
        self._stack.append(frame)
        self._collapsed += collapse
        try:
            yield
        finally:
            self._collapsed -= collapse
            self._stack.pop()
            took = self.clock() - frame[1]
            self.add(name, took - frame[2])
            if self._stack:
                self._stack[-1][2] += took

    @contextlib.contextmanager
    def candidate(self, cid: str) -> Iterator[None]:
        before, self._current = self._current, cid
        try:
            yield
        finally:
            self._current = before

    def total(self) -> float:
        return self.clock() - self.t0

    def to_json(self, total: float | None = None) -> dict:
        """{"seconds": {phase: s}, "per_candidate": {id: {phase: s}}, "total_s", "unaccounted_s",
        "candidates"}: the phases in ORDER (others after), rounded to ms."""
        total = self.total() if total is None else total
        names = [n for n in ORDER if n in self.seconds] + sorted(n for n in self.seconds if n not in ORDER)
        return {"seconds": {n: round(self.seconds[n], 3) for n in names},
                "per_candidate": {c: {n: round(s, 3) for n, s in d.items()} for c, d in self.per_candidate.items()},
                "total_s": round(total, 3), "unaccounted_s": round(total - sum(self.seconds.values()), 3),
                "candidates": len(self.per_candidate)}


def summary_line(phases: dict) -> str:
    """One line: each phase's share of the run (largest first) and candidates per 90 s."""
    secs, total = phases.get("seconds") or {}, float(phases.get("total_s") or 0.0)
    if total <= 0:
        return "time: (no phases recorded)"
    parts = [f"{n} {s:.1f} s ({100 * s / total:.0f}%)" for n, s in sorted(secs.items(), key=lambda kv: -kv[1]) if s >= 0.05]
    n = int(phases.get("candidates") or 0)
    return (f"time: {total:.0f} s, {n} candidates ({90 * n / total:.1f} per 90 s): " + ", ".join(parts)
            + (f", other {phases['unaccounted_s']:.1f} s" if phases.get("unaccounted_s", 0) >= 0.05 else ""))
