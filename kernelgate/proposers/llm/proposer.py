"""`LLMProposer`: language-model agents behind the `Proposer` protocol and the same gate as every strategy.

Each `propose(ctx, rng, n)` first reads what the gate said about the agents' earlier candidates (from
`ctx.history`), then asks up to `n` idle agents at once (at most the client's concurrency in flight), one
request each, and turns each reply into a candidate (`make_candidate`: the reference verbatim, then the
reply's code) carrying its usage (model, requests, retries, tokens, cost, seconds waiting). Replies that
make no candidate (no usable code, a duplicate, a failed request) are kept in `attempts` with their reason.
A configuration problem (unreachable endpoint, refused key) or a spent budget stops the proposer: it returns
no more candidates and says why once, in `notes` and `stopped`.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...records import Candidate, Evaluation
from .. import Context, make_candidate
from . import prompts
from .accounting import Call, Client, Limits, Prices, Spent
from .agents import Agent
from .backends import Backend, LLMError
from .parse import extract_code
from .spec import Spec, make_backend, parse_spec
from .supervisor import ROLE as SUPERVISOR, Supervisor


@dataclass
class Attempt:
    """One request of one agent and what came of it."""

    agent: str
    turn: str                           # explore | refine | fix
    outcome: str                        # candidate | no_code | duplicate | request_failed | stopped
    reason: str = ""                    # why no candidate
    candidate: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    finish: str = ""                    # the backend's stop reason

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "turn": self.turn, "outcome": self.outcome, "reason": self.reason,
                "candidate": self.candidate, "usage": self.usage, "finish": self.finish}


@dataclass
class _Job:
    agent: Agent
    turn: str
    user: str
    messages: list[dict[str, str]]
    parent: str | None


class LLMProposer:
    """Agents that ask a model for candidates.

    proposer = LLMProposer.from_args(llm="openai:qwen-coder@http://localhost:8000/v1", hints=["..."])
    cands = proposer.propose(ctx, rng, n)      # the search judges them and passes the verdicts in ctx.history
    """

    name = "llm"

    def __init__(self, client: Client, *, agents: Sequence[str] = ("explorer", "refiner"),
                 hints: Iterable[str] = (), history_tokens: int = 12_000, max_fixes: int = 3,
                 failures_shown: int = 4, min_pieces: int = 2, max_pieces: int = 6):
        self.client = client
        counts: dict[str, int] = {}
        self.agents: list[Agent] = []
        for role in agents:
            counts[role] = counts.get(role, 0) + 1
            self.agents.append(Agent(f"{role}-{counts[role]}", role, history_tokens, max_fixes))
        if not self.agents:
            raise LLMError("the LLM proposer needs at least one agent (explorer, refiner or supervisor)")
        self.supervisor = Supervisor(min_pieces, max_pieces)   # for agents with the role "supervisor"
        self.hints: list[str] = [h for h in hints if h and h.strip()]
        self.failures_shown = failures_shown
        self.attempts: list[Attempt] = []
        self.notes: list[str] = []
        self.stopped: str | None = None
        self.calls = 0
        self._owner: dict[str, Agent] = {}       # candidate id -> the agent that wrote it
        self._answered: set[str] = set()         # evaluations already passed to their agent

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_backend(cls, backend: Backend, *, prices: Prices | str | Mapping[str, Any] | None = None,
                     limits: Limits | None = None, max_tokens: int = 8192, timeout: float = 180.0,
                     retries: int = 4, backoff: float = 2.0, concurrency: int = 2,
                     sleep: Callable[[float], None] | None = None, **kw: Any) -> "LLMProposer":
        extra = {"sleep": sleep} if sleep is not None else {}
        client = Client(backend, prices=prices, limits=limits, max_tokens=max_tokens, timeout=timeout,
                        retries=retries, backoff=backoff, concurrency=concurrency, **extra)
        return cls(client, **kw)

    @classmethod
    def from_args(cls, llm: str | None = None, *, endpoint: str | None = None, model: str | None = None,
                  cmd: str | None = None, keep_env: tuple[str, ...] = (), **kw: Any) -> "LLMProposer | None":
        """From the CLI's --llm / --llm-endpoint / --llm-model / --llm-cmd (None: no LLM configured).
        Raises LLMError / MissingExtra (one line naming the fix) on a missing SDK, key or model."""
        spec = parse_spec(llm, endpoint=endpoint, model=model, cmd=cmd)
        return None if spec is None else cls.from_spec(spec, keep_env=keep_env, **kw)

    @classmethod
    def from_spec(cls, spec: Spec | str, *, keep_env: tuple[str, ...] = (), **kw: Any) -> "LLMProposer":
        if isinstance(spec, str):
            parsed = parse_spec(spec)
            if parsed is None:
                raise LLMError("an empty --llm: name a model, e.g. openai:MODEL@URL")
            spec = parsed
        return cls.from_backend(make_backend(spec, keep_env=keep_env), **kw)

    def __repr__(self) -> str:
        return f"<LLMProposer {self.client.backend.describe()} agents={[a.name for a in self.agents]}>"

    def check(self, timeout: float = 10.0) -> str:
        """Before a run: is the endpoint there, and does it take the key? Raises LLMError (one line naming
        the fix); returns a line for the run's log (a model the endpoint does not list is named there)."""
        served = self.client.backend.probe(timeout)
        model = self.client.backend.model
        line = f"llm: {self.client.backend.describe()}, agents {', '.join(a.name for a in self.agents)}"
        if served and model not in served:
            shown = ", ".join(served[:8]) + (" ..." if len(served) > 8 else "")
            line += f" (the endpoint lists no model '{model}'; it lists: {shown})"
            self._note(line)
        return line

    @property
    def ledger(self):
        return self.client.ledger

    # ---------------------------------------------------------------- the protocol
    def propose(self, ctx: Context, rng: random.Random, n: int, generation: int | None = None) -> list[Candidate]:
        """Up to n new candidates, one per agent asked (repairs first, then the agents in turn); `rng` is
        unused: which agent goes is deterministic, what a model writes is not."""
        self.calls += 1
        if self.stopped or n <= 0:
            return []
        gen = ctx.generation if generation is None else generation
        self._answer(ctx)
        jobs = self._plan(ctx, n)
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(len(jobs), self.client.concurrency)) as pool:
            futures = [pool.submit(self.client.complete, j.messages) for j in jobs]
            outcomes: list[Call | BaseException] = []
            for f in futures:
                try:
                    outcomes.append(f.result())
                except (Spent, LLMError) as e:
                    outcomes.append(e)
        out: list[Candidate] = []
        tried = ctx.tried()
        for job, outcome in zip(jobs, outcomes):
            c = self._take(ctx, job, outcome, gen, tried | {x.id for x in out})
            if c is not None:
                out.append(c)
        return out

    # ---------------------------------------------------------------- inside
    def _agent_of(self, e: Evaluation) -> Agent | None:
        a = self._owner.get(e.candidate.id)
        if a is None and e.candidate.proposer == self.name:       # a resumed run: the agent by its name
            name = dict(e.candidate.params).get("agent")
            a = next((x for x in self.agents if x.name == name), None)
        return a

    def _answer(self, ctx: Context) -> None:
        """Each agent hears about its candidates the gate has judged since it was last asked."""
        for e in ctx.history:
            if e.candidate.id in self._answered:
                continue
            self._answered.add(e.candidate.id)
            a = self._agent_of(e)
            if a is not None:
                a.on_verdict(e)
                if a.role == SUPERVISOR:
                    self.supervisor.on_verdict(e, ctx.baseline_ms)
                if e.accepted:
                    a.news.append(prompts.verdict_feedback(e, ctx))

    def _plan(self, ctx: Context, n: int) -> list[_Job]:
        has_best = ctx.best() is not None
        agents = [a for a in self.agents if a.role != SUPERVISOR or self._supervised(ctx)]
        if not agents:                         # a supervisor alone, on a model that does not split
            self._stop(self.supervisor.note())
        k = len(agents)
        planned = [a.turn(has_best) for a in agents]
        # repairs first; then the agents in turn (with n below the number of agents, each gets its go)
        order = sorted(range(k), key=lambda i: (planned[i] != "fix", (i - self.calls + 1) % k))
        turns = [(agents[i], planned[i]) for i in order]
        system = prompts.system_prompt(ctx, self.hints)
        jobs = []
        for agent, turn in turns[:n]:
            if agent.role == SUPERVISOR:       # its piece first: the prompts are the piece's
                self.supervisor.piece_for(agent, fresh=turn != "fix")
            user, parent = self._request(ctx, agent, turn)
            text = self.supervisor.system(ctx, agent, self.hints) if agent.role == SUPERVISOR else system
            jobs.append(_Job(agent, turn, user, agent.messages(text, user), parent))
        return jobs

    def _supervised(self, ctx: Context) -> bool:
        """Whether the supervisor's agents are enabled on this workload (said once in notes when not)."""
        if self.supervisor.enabled(ctx):
            return True
        self._note(self.supervisor.note())
        return False

    def _request(self, ctx: Context, agent: Agent, turn: str) -> tuple[str, str | None]:
        """The user turn and the candidate the reply will refine (its parent)."""
        own = {c for c, a in self._owner.items() if a is agent}
        parts = list(agent.news)
        if agent.abandoned is not None:
            e = agent.abandoned
            parts.append(prompts.verdict_feedback(e, ctx) + f"\nIt still fails after {agent.max_fixes} "
                         f"fix{'es' if agent.max_fixes != 1 else ''}: leave that approach.")
        parent: str | None = None
        if turn == "fix" and agent.retry:
            parts.append(agent.retry)
            if not agent.has_text(agent.retry_request):       # the request it answered was trimmed away
                parts.append("The request was:\n" + agent.retry_request)
            parent = agent.retry_parent
        elif turn == "fix":
            e = agent.last
            with_code = not agent.has_reply_for(e.candidate.id)
            if agent.role == SUPERVISOR:       # its code is the piece's, not the recomposed model's
                parts.append(prompts.fix_prompt(e, ctx) + ("\nYour code for the piece was:\n```python\n"
                                                           + self.supervisor.code_of(e.candidate.id) + "\n```"
                                                           if with_code else ""))
            else:
                parts.append(prompts.fix_prompt(e, ctx, with_code=with_code))
            parent = e.candidate.id
        elif agent.role == SUPERVISOR:
            parts.append(self.supervisor.fresh_prompt(ctx, agent))
        else:
            parts.append(self._fresh(ctx, turn, own))
            parent = ctx.best().candidate.id if turn == "refine" else None
        return "\n\n".join(p for p in parts if p), parent

    def _fresh(self, ctx: Context, turn: str, own: set[str]) -> str:
        if turn == "refine":
            return prompts.refine_prompt(ctx, self.failures_shown, own)
        return prompts.explore_prompt(ctx, self.failures_shown, own)

    def _stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = reason
            self.notes.append(f"llm proposer stopped: {reason}")

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _take(self, ctx: Context, job: _Job, outcome: Call | BaseException, gen: int,
              tried: set[str]) -> Candidate | None:
        agent = job.agent
        if isinstance(outcome, BaseException):
            reason = str(outcome) if isinstance(outcome, LLMError) else f"budget spent: {outcome}"
            self._stop(reason)
            self.attempts.append(Attempt(agent.name, job.turn, "stopped", reason))
            return None
        usage = outcome.usage.to_json()
        reply = outcome.reply
        if reply is None:
            self.attempts.append(Attempt(agent.name, job.turn, "request_failed", outcome.error, usage=usage))
            if not any(n.startswith(f"llm request failed ({outcome.kind})") for n in self.notes):
                self._note(f"llm request failed ({outcome.kind}): {outcome.error} (each failure is in attempts)")
            return None
        agent.answered(job.turn)
        parsed = extract_code(reply.text)
        if not parsed.ok:
            agent.remember(job.user, reply.text)
            agent.retry = prompts.no_code_feedback(parsed.reason, reply.truncated)
            agent.retry_request, agent.retry_parent = job.user, job.parent
            self.attempts.append(Attempt(agent.name, job.turn, "no_code", parsed.reason, usage=usage,
                                         finish=reply.finish))
            return None
        piece, codes = None, {}
        if agent.role == SUPERVISOR:            # the whole model, with the piece substituted
            piece, body, codes = self.supervisor.body(agent, parsed.code)
            c = make_candidate(ctx, f"llm:{agent.name}:{piece}", body, parent=job.parent,
                               params={"agent": agent.name, "piece": piece, "turn": job.turn, "model": reply.model},
                               language=parsed.language, generation=gen, proposer=self.name)
        else:
            c = make_candidate(ctx, f"llm:{agent.name}:{job.turn}", parsed.code, parent=job.parent,
                               params={"agent": agent.name, "turn": job.turn, "model": reply.model},
                               language=parsed.language, generation=gen, proposer=self.name)
        if c.id in tried or c.id in self._owner:
            agent.remember(job.user, reply.text)
            prior = next((e.candidate.strategy for e in ctx.history if e.candidate.id == c.id), c.strategy)
            agent.retry = prompts.duplicate_feedback(prior)
            agent.retry_request, agent.retry_parent = job.user, job.parent
            self.attempts.append(Attempt(agent.name, job.turn, "duplicate", f"identical to {prior}",
                                         c.id, usage, reply.finish))
            return None
        agent.remember(job.user, reply.text, c.id)
        self._owner[c.id] = agent
        if piece is not None:
            self.supervisor.took(c.id, piece, codes)
        self.attempts.append(Attempt(agent.name, job.turn, "candidate", "", c.id, usage, reply.finish))
        return replace(c, usage=usage)

    # ---------------------------------------------------------------- for the report
    def summary(self) -> dict[str, Any]:
        """What the run's LLM use came to: backend (no key), totals, each attempt, notes."""
        outcomes: dict[str, int] = {}
        for a in self.attempts:
            outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
        return {"backend": self.client.backend.describe(), "agents": [a.name for a in self.agents],
                "hints": list(self.hints), "totals": self.ledger.to_json(), "outcomes": outcomes,
                "attempts": [a.to_json() for a in self.attempts], "notes": list(self.notes),
                "stopped": self.stopped}
