"""The supervisor: an agent of the LLM proposer (role "supervisor") that optimizes a multi-layer model one
piece at a time, beside the explorers and refiners and the built-in strategies in the search's one population.

    LLMProposer.from_args(llm=..., agents=("explorer", "refiner", "supervisor"), min_pieces=2)

On its first turn the reference's forward is split with torch.fx (split.py: cuts before each heavy layer,
shapes from a meta run). The agent is enabled only when the forward makes at least `min_pieces` pieces (and
one of them stands alone as a workload); otherwise it is never asked, and the proposer's notes say why once.
Pieces are taken most expensive first (roofline FLOPs and bytes on the machine model), then round again.

For a piece the agent sees the piece's own workload (its Model, forward and input shapes), never the whole
model's code, and writes a `ModelNew` for it. Its candidate is always the whole model: `split.recompose_body`
substitutes the piece (and the pieces of the fastest supervisor candidate so far, when that beat the
baseline) into the reference's traced graph, so the gate verifies and times the model end to end. Each such
candidate is a normal Candidate (proposer "llm", strategy `llm:supervisor-1:<piece>`, params agent and
piece). The gate's verdict goes back to the agent as any agent's does: a failure is its to fix on the same
piece (up to max_fixes tries), an accepted candidate moves it to the next piece.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...graph import GraphInfo
from ...records import Evaluation
from .. import Context
from . import prompts
from .agents import Agent
from .split import Piece, Split, recompose_body, split_reference

ROLE = "supervisor"

PIECE_INTRO = """\
This workload is one piece of a larger model's forward, cut out with torch.fx: {describe}.
Your `ModelNew` for it replaces the piece inside the whole model; the whole model is then verified against
an fp64 oracle and timed end to end. The piece's inputs there are what the layers before it compute, in the
shapes given (its `get_inputs` only stands in for them). Its parameters are the whole model's: keep the
piece `Model`'s submodules and parameter names (subclassing `Model` does this) and read them in `forward`."""


@dataclass
class _Own:
    piece: str
    codes: dict[str, str]                # every piece substituted in the candidate: piece -> code


class Supervisor:
    """The pieces, which piece each supervisor agent works on, and the pieces kept so far."""

    def __init__(self, min_pieces: int = 2, max_pieces: int = 6):
        self.min_pieces, self.max_pieces = min_pieces, max_pieces
        self.split: Split | None = None
        self.reason = ""                         # why it is not enabled ("" when it is)
        self.cursor: dict[str, int] = {}         # agent -> its position in the cost order
        self.current: dict[str, Piece] = {}      # agent -> the piece it works on
        self.own: dict[str, _Own] = {}           # candidate id -> what it substituted
        self.kept: dict[str, str] = {}           # the fastest supervisor candidate's pieces (when it beat the baseline)
        self.best_ms: float | None = None

    # ---------------------------------------------------------------- enabling
    def enabled(self, ctx: Context) -> bool:
        """Split the reference once; enabled with at least min_pieces pieces."""
        if self.split is None:
            self.split = split_reference(ctx.reference_source, ctx.reference_class, max_pieces=self.max_pieces,
                                         machine=ctx.machine)
            parts = len(set(self.split.piece_of.values()))
            if self.split.reason:
                self.reason = self.split.reason
            elif parts < self.min_pieces:
                self.reason = f"the forward makes {parts} piece(s), fewer than {self.min_pieces}"
        return not self.reason

    def note(self) -> str:
        return f"llm supervisor not used: {self.reason}" if self.reason else ""

    # ---------------------------------------------------------------- a turn
    def piece_for(self, agent: Agent, fresh: bool) -> Piece:
        """The piece of the agent's turn: on a fresh turn the next one by cost (its conversation, about
        another workload, is dropped); on a fix, or when its last request got no reply, the one it works on."""
        assert self.split is not None
        order = self.split.by_cost()
        if agent.name not in self.current or (fresh and agent.turns):   # moves on once the piece had a reply
            i = self.cursor.get(agent.name, -1) + 1
            self.cursor[agent.name] = i
            piece = order[i % len(order)]
            if self.current.get(agent.name) is not piece:
                agent.turns.clear()
            self.current[agent.name] = piece
        return self.current[agent.name]

    def system(self, ctx: Context, agent: Agent, hints) -> str:
        """The system prompt of a piece: the piece's workload in place of the model's, no graph summary,
        no baseline time (the model's is not the piece's), the same machine and contract."""
        piece = self.current[agent.name]
        pctx = replace(ctx, reference_source=piece.source, reference_class="Model", graph=GraphInfo(False),
                       history=(), baseline_ms=None, predicted_ms={})
        return prompts.system_prompt(pctx, hints) + "\n" + PIECE_INTRO.format(describe=self.describe(piece)) + "\n"

    def describe(self, piece: Piece) -> str:
        assert self.split is not None
        total = sum(p.cost_s for p in self.split.pieces)
        share = f", about {100 * piece.cost_s / total:.0f}% of the model's estimated time" if total else ""
        return f"piece {piece.index + 1} of {len(set(self.split.piece_of.values()))}: {', '.join(piece.calls)}{share}"

    def fresh_prompt(self, ctx: Context, agent: Agent) -> str:
        piece = self.current[agent.name]
        ins = ", ".join(f"`{n}` {s}" for n, s in piece.inputs)
        parts = [f"Write a faster `ModelNew` for this piece: inputs {ins}, output {', '.join(piece.outputs)}."]
        mine = [e for e in ctx.history if e.candidate.id in self.own and self.own[e.candidate.id].piece == piece.name]
        if mine:
            lines = [f"- {e.candidate.strategy}: " + (prompts.timing_line(e, ctx.baseline_ms) if e.accepted
                                                      else f"rejected ({e.verdict.reason.value})") for e in mine[-4:]]
            parts.append("Earlier versions of this piece, measured in the whole model:\n" + "\n".join(lines))
        if piece.name in self.kept:
            parts.append(f"The fastest whole model so far ({self.best_ms:.4g} ms per call) uses this version of the "
                         "piece; make it faster:\n```python\n" + self.kept[piece.name].rstrip() + "\n```")
        if ctx.baseline_ms:
            parts.append(f"The whole model takes {ctx.baseline_ms:.4g} ms per call in the faster of eager PyTorch "
                         "and torch.compile.")
        return "\n\n".join(parts)

    def code_of(self, candidate_id: str) -> str:
        own = self.own.get(candidate_id)
        return own.codes.get(own.piece, "") if own else ""

    # ---------------------------------------------------------------- the candidate
    def body(self, agent: Agent, code: str) -> tuple[str, str, dict[str, str]]:
        """The whole-model candidate's code for the agent's piece: (piece, body, every piece substituted)."""
        assert self.split is not None
        piece = self.current[agent.name]
        codes = {**self.kept, piece.name: code}
        return piece.name, recompose_body(self.split, codes), codes

    def took(self, candidate_id: str, piece: str, codes: dict[str, str]) -> None:
        self.own[candidate_id] = _Own(piece, codes)

    def on_verdict(self, e: Evaluation, baseline_ms: float | None) -> None:
        """Keep the pieces of an accepted candidate faster than every earlier one and than the baseline."""
        own = self.own.get(e.candidate.id)
        if own is None or not e.accepted or e.timing is None:
            return
        ms = e.timing.median_ms
        beat = e.speedup.ratio > 1.0 if e.speedup is not None else (baseline_ms is None or ms < baseline_ms)
        if beat and (self.best_ms is None or ms < self.best_ms):
            self.kept, self.best_ms = dict(own.codes), ms
