"""An agent: a role, a short conversation kept within a token budget, and what it is owed about its own
last candidate.

Roles: an explorer proposes new approaches; a refiner improves the best candidate; a supervisor optimizes
one piece of a multi-layer model at a time (supervisor.py). Each becomes a fixer
for a turn when its own last candidate failed: a build error comes back to it with the error lines, a wrong
result with the measured error (up to `max_fixes` tries in a row, then it moves on); an accepted candidate
comes back with its time and bottleneck. A reply with no usable code, or code identical to a candidate
already tried, comes back to it at once, with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...records import Evaluation
from .backends import Message, estimate_tokens

ROLES = ("explorer", "refiner", "supervisor")      # supervisor: a piece of the model at a time (supervisor.py)
TURNS = ("explore", "refine", "fix")


@dataclass
class Turn:
    role: str                         # user | assistant
    text: str
    candidate: str | None = None      # the candidate an assistant turn became


class Agent:
    def __init__(self, name: str, role: str, history_tokens: int = 12_000, max_fixes: int = 3):
        if role not in ROLES:
            raise ValueError(f"agent role '{role}': one of {', '.join(ROLES)}")
        self.name, self.role = name, role
        self.history_tokens, self.max_fixes = history_tokens, max_fixes
        self.turns: list[Turn] = []
        self.last: Evaluation | None = None     # its latest candidate through the gate, until it is answered
        self.retry: str = ""                    # feedback on a reply that made no candidate (no code, duplicate)
        self.retry_request: str = ""            # the request that reply answered
        self.retry_parent: str | None = None
        self.news: list[str] = []               # feedback for the next turn (its accepted candidate's figures)
        self.fixes = 0                          # fix turns in a row
        self.abandoned: Evaluation | None = None   # a failure it gave up fixing (named in its next turn)

    def __repr__(self) -> str:
        return f"<Agent {self.name} turns={len(self.turns)} fixes={self.fixes}>"

    # ---------------------------------------------------------------- what comes back
    def on_verdict(self, e: Evaluation) -> None:
        """Its candidate went through the gate."""
        self.last = e
        if e.accepted:
            self.fixes = 0

    def turn(self, has_best: bool) -> str:
        """What it does next: fix its own last failure (a rejected candidate, a reply with no usable code),
        up to max_fixes turns in a row; else refine the best (a refiner, once there is one) or explore."""
        rejected = self.last is not None and not self.last.accepted
        if (rejected or self.retry) and self.fixes < self.max_fixes:
            return "fix"
        if rejected or self.retry:                 # given up: named in its next turn, then forgotten
            self.abandoned = self.last if rejected else None
            self.last, self.retry, self.fixes = None, "", 0
        return "refine" if self.role == "refiner" and has_best else "explore"

    def answered(self, turn: str) -> None:
        """A reply came for a turn: what it was owed has been said."""
        self.fixes = self.fixes + 1 if turn == "fix" else 0
        self.last, self.retry, self.abandoned = None, "", None
        self.news.clear()

    def has_text(self, text: str) -> bool:
        return any(t.text == text for t in self.turns)

    # ---------------------------------------------------------------- the conversation
    def has_reply_for(self, candidate_id: str) -> bool:
        return any(t.candidate == candidate_id for t in self.turns)

    def messages(self, system: str, user: str) -> list[Message]:
        """The request: the system text, the turns kept, the new user turn."""
        self.trim()
        return ([{"role": "system", "content": system}]
                + [{"role": t.role, "content": t.text} for t in self.turns]
                + [{"role": "user", "content": user}])

    def remember(self, user: str, reply: str, candidate: str | None = None) -> None:
        self.turns += [Turn("user", user), Turn("assistant", reply, candidate)]
        self.trim()

    def tokens(self) -> int:
        return sum(estimate_tokens(t.text) for t in self.turns)

    def trim(self) -> None:
        """Drop the oldest exchanges (a request and its reply together) until the rest fits the budget."""
        while self.turns and self.tokens() > self.history_tokens:
            del self.turns[:2]
