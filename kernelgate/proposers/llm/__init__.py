"""LLM agents as proposers: a model writes candidates, the same gate as every strategy judges them.

    from kernelgate.proposers.llm import LLMProposer, LLMError, Limits

    proposer = LLMProposer.from_args(llm="anthropic:MODEL", hints=["fuse the GroupNorm into the conv"],
                                     limits=Limits(max_cost_usd=2.0))      # None: no LLM configured
    candidates = proposer.propose(ctx, rng, n)     # Candidates with proposer="llm" and .usage
    proposer.summary()                             # totals, each attempt (with reasons), notes, why it stopped

Modules: backends.py (OpenAI-compatible, Anthropic, a command: `complete(messages) -> Reply`), spec.py
(`openai:MODEL@URL` / `anthropic:MODEL` / `cmd:...` and the CLI's separate arguments), accounting.py
(prices, usage, ledger, limits; `Client`: retries with backoff, timeouts, a concurrency cap), prompts.py
(prompts from the Context and the gate's verdicts), parse.py (code out of a reply), agents.py (roles, short
histories), proposer.py (`LLMProposer`), split.py (a forward in torch.fx pieces, each a workload of its own;
the whole-model candidate with optimized pieces substituted), supervisor.py (the agent role "supervisor":
`agents=("explorer", "refiner", "supervisor")` optimizes a multi-layer model a piece at a time). The SDKs
are optional: `pip install 'kernelgate[llm]'`.
"""
from __future__ import annotations

from .accounting import PRICES, Call, Client, Ledger, Limits, Prices, Spent, Usage, parse_prices
from .agents import Agent
from .backends import (AnthropicBackend, Backend, CommandBackend, LLMError, OpenAIBackend, Reply, RequestError,
                       agent_env)
from .parse import Parsed, extract_code, language_of
from .proposer import Attempt, LLMProposer
from .spec import Spec, make_backend, parse_spec
from .split import Piece, Split, recompose_body, split_reference
from .supervisor import Supervisor

__all__ = ["PRICES", "Agent", "AnthropicBackend", "Attempt", "Backend", "Call", "Client", "CommandBackend",
           "LLMError", "LLMProposer", "Ledger", "Limits", "OpenAIBackend", "Parsed", "Piece", "Prices", "Reply",
           "RequestError", "Spec", "Spent", "Split", "Supervisor", "Usage", "agent_env", "extract_code",
           "language_of", "make_backend", "parse_prices", "parse_spec", "recompose_body", "split_reference"]
