"""Proposers: anything that turns a workload, a machine and a history into candidates.

The built-in strategy library is the first proposer; LLM agents and humans come through the same
protocol. Every candidate, whoever proposed it, goes through the same gate.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

from ..graph import GraphInfo
from ..records import Candidate, Contract, Evaluation, Level

#: the search's modes (kernelgate/search/policy.py picks one per generation)
EXPLORE, REFINE, RESTART = "explore", "refine", "restart"


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
    machine: dict[str, Any]             # the target's model (targets.Machine as a dict): peak rates per dtype,
                                        # bandwidth, SMs (cores), L2 (last cache), shared memory, launch overhead
    baseline_ms: float | None = None    # the faster baseline's time
    predicted_ms: dict[str, float] = field(default_factory=dict)   # strategy -> fusion-estimated time
    generation: int = 0                 # the search's generation this request is for (candidates carry it)
    mode: str = EXPLORE                 # explore | refine | restart: what the search asks of this generation
    #: what bounds the faster baseline's forward (profiling/bottleneck.py: launch, latency, memory, compute): its
    #: profile's, else what the graph and the roofline floor lead one to expect ("launch" or ""), else ""
    bound: str = ""
    #: the kernel languages candidates may be written in (optimize --languages; () = the target's defaults,
    #: `default_languages`); a strategy or agent writing in a language not listed proposes nothing
    languages: tuple[str, ...] = ()

    def allows(self, language: str) -> bool:
        """Whether candidates may use this kernel language (triton | cuda | pallas | cpp); given a strategy's name
        (triton:softmax, cpp:pointwise), whether its language is allowed (names of no language always are)."""
        language = language.split(":", 1)[0]
        return language not in LANGUAGES or language in (self.languages or default_languages(self.target))

    def tried(self) -> set[str]:
        return {e.candidate.id for e in self.history}

    def best(self) -> Evaluation | None:
        timed = [e for e in self.history if e.accepted and e.timing is not None]
        return min(timed, key=lambda e: e.timing.median_ms) if timed else None


@runtime_checkable
class Proposer(Protocol):
    """What the search calls, once per generation, for each proposer in its population.

    `propose(ctx, rng, n)` returns up to n new candidates (ids not in `ctx.tried()`), each with
    `generation=ctx.generation` and `proposer=self.name`; `rng` is the search's seeded generator (a
    proposer that samples uses it, so a run is deterministic per --seed). The search judges every candidate
    with the same gate and passes the verdicts back in the next ctx.history.

    `ctx.mode` is the search's mode for the generation: "explore" (from the reference), "refine" (build on
    the best verified candidates) or "restart" (no improvement for a while: from the reference again). A
    proposer that distinguishes modes lists the ones it implements in an attribute `modes` (the library:
    ("explore", "refine")) and is asked only in those: in the search's mode where it lists it ("restart" is
    "explore" where it lists no "restart"), and, when it has nothing there, once in each other mode it lists.
    A proposer without `modes` is asked once per generation and reads ctx.mode as a hint or ignores it (the
    LLM proposer's agents have their own roles).

    Optional: `restore(ctx, candidates) -> int`, called once before the first generation of a resumed run
    with the candidates evaluated before (a proposer rebuilds what it needs to build on them, e.g. the
    library's stacks from `Candidate.stack`); `stopped`, truthy once the proposer will propose nothing more
    (the LLM proposer: a spent budget, an unreachable endpoint). A generation in which no proposer has a
    candidate ends the search when every proposer lists its modes or has stopped (a model may have nothing
    one time and something the next: SearchConfig.empty_generations)."""

    name: str

    def propose(self, ctx: Context, rng: random.Random, n: int) -> list[Candidate]:
        ...


#: kernel languages per target when --languages is not given (Pallas needs JAX: asked for by name)
DEFAULT_LANGUAGES = {"cuda": ("triton", "cuda"), "cpu": ("cpp",)}
#: every kernel language a candidate may be written in
LANGUAGES = ("triton", "cuda", "pallas", "cpp")


#: what --languages pallas says when JAX is not installed
PALLAS_NEEDS_JAX = ("the pallas language needs JAX: pip install 'kernelgate[pallas]' (on an NVIDIA GPU with "
                    "CUDA 13: pip install 'jax[cuda13]')")


def default_languages(target: str) -> tuple[str, ...]:
    return DEFAULT_LANGUAGES.get(target, ())


def parse_languages(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """--languages (a comma list, or a sequence) as a tuple in the given order; () for none given. Raises
    ValueError naming an unknown language, or that pallas needs JAX when it is not installed."""
    import importlib.util
    items = spec.split(",") if isinstance(spec, str) else list(spec or ())
    out = tuple(dict.fromkeys(s.strip().lower() for s in items if s and s.strip()))
    unknown = [s for s in out if s not in LANGUAGES]
    if unknown:
        raise ValueError(f"unknown kernel language {', '.join(map(repr, unknown))} (known: {', '.join(LANGUAGES)})")
    if "pallas" in out and importlib.util.find_spec("jax") is None:
        raise ValueError(PALLAS_NEEDS_JAX)
    return out


def modes_of(proposer: Any) -> tuple[str, ...]:
    """The modes a proposer implements (() when it does not distinguish them)."""
    return tuple(getattr(proposer, "modes", ()) or ())


def make_candidate(ctx: Context, strategy: str, body: str, *, parent: str | None = None,
                   params: dict[str, Any] | None = None, language: str = "torch", generation: int = 0,
                   proposer: str = "library", stack: Sequence[Level] | Iterable[Level] = ()) -> Candidate:
    """A candidate file: the reference source verbatim, then the strategy's `ModelNew`."""
    source = (ctx.reference_source.rstrip() + "\n\n\n"
              f"# ---- kernelgate strategy: {strategy} ----\n" + body.strip() + "\n")
    cid = hashlib.sha256(source.encode()).hexdigest()[:16]
    return Candidate(cid, strategy, source, parent, tuple(sorted((params or {}).items())), language, generation,
                     proposer, stack=tuple(stack))
