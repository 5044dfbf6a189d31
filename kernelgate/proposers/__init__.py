"""Proposers: anything that turns a workload, a machine and a history into candidates.

The built-in strategy library is the first proposer; LLM agents and humans come through the same
protocol. Every candidate, whoever proposed it, goes through the same gate.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..graph import GraphInfo
from ..records import Candidate, Contract, Evaluation


@dataclass(frozen=True)
class Context:
    """Everything a proposer may look at."""

    reference_source: str               # the workload file's text
    reference_class: str
    target: str                         # cpu | cuda
    device_name: str
    contract: Contract
    graph: GraphInfo
    history: tuple[Evaluation, ...]
    machine: dict[str, Any]             # SMs, L2, memory; the target's model as far as known
    baseline_ms: float | None = None    # the faster baseline's time
    predicted_ms: dict[str, float] = field(default_factory=dict)   # strategy -> fusion-estimated time

    def tried(self) -> set[str]:
        return {e.candidate.id for e in self.history}

    def best(self) -> Evaluation | None:
        timed = [e for e in self.history if e.accepted and e.timing is not None]
        return min(timed, key=lambda e: e.timing.median_ms) if timed else None


class Proposer(Protocol):
    name: str

    def propose(self, ctx: Context, rng: random.Random, n: int) -> list[Candidate]:
        """Up to n new candidates (ids not in ctx.tried())."""
        ...


def make_candidate(ctx: Context, strategy: str, body: str, *, parent: str | None = None,
                   params: dict[str, Any] | None = None, language: str = "torch", generation: int = 0,
                   proposer: str = "library") -> Candidate:
    """A candidate file: the reference source verbatim, then the strategy's `ModelNew`."""
    source = (ctx.reference_source.rstrip() + "\n\n\n"
              f"# ---- kernelgate strategy: {strategy} ----\n" + body.strip() + "\n")
    cid = hashlib.sha256(source.encode()).hexdigest()[:16]
    return Candidate(cid, strategy, source, parent, tuple(sorted((params or {}).items())), language, generation,
                     proposer)
