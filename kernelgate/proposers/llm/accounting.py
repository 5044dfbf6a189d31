"""What asking a model costs, and asking it safely: prices, per-request usage, the run's ledger, limits,
and `Client`: one backend behind retries with backoff (429 and 5xx, Retry-After respected), a per-request
timeout and a cap on concurrent requests.

Prices are USD per million input / output tokens, matched on the longest model-name prefix: a small table
of list prices (as published when written; they change) under the user's overrides (`prices=` as a mapping,
a string `MODEL=IN/OUT,...`, or a JSON / TOML file; else the `KERNELGATE_LLM_PRICES` variable). A model with
no price is counted as unpriced (cost None), never as free.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .backends import Backend, LLMError, Message, Reply, RequestError

#: USD per million tokens (input, output); longest prefix of the model name wins
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60), "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40), "gpt-4.1-mini": (0.40, 1.60), "gpt-4.1": (2.00, 8.00),
    "o4-mini": (1.10, 4.40), "o3": (2.00, 8.00),
    "claude-opus-4-5": (5.00, 25.00), "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00), "claude-3-7-sonnet": (3.00, 15.00), "claude-3-5-sonnet": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00), "claude-3-5-haiku": (0.80, 4.00),
}


def parse_prices(spec: str | Mapping[str, Any] | None) -> dict[str, tuple[float, float]]:
    """User prices: a mapping {model: (in, out) | {"input": in, "output": out}}, a string
    `MODEL=IN/OUT,MODEL2=IN/OUT`, or the path of a .json / .toml file holding such a mapping."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        text = spec.strip()
        if text and Path(text).is_file():
            raw = Path(text).read_text()
            spec = tomllib.loads(raw) if text.endswith(".toml") else json.loads(raw)
        else:
            out: dict[str, tuple[float, float]] = {}
            for item in filter(None, (s.strip() for s in text.split(","))):
                name, _, pair = item.rpartition("=")
                a, _, b = pair.partition("/")
                try:
                    out[name.strip()] = (float(a), float(b or a))
                except ValueError:
                    raise LLMError(f"price '{item}' does not parse: write MODEL=IN/OUT in USD per million "
                                   "tokens") from None
                if not name.strip():
                    raise LLMError(f"price '{item}' names no model: write MODEL=IN/OUT")
            return out
    out = {}
    for name, v in dict(spec).items():
        try:
            pair = (v["input"], v["output"]) if isinstance(v, Mapping) else tuple(v)
            out[str(name)] = (float(pair[0]), float(pair[1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise LLMError(f"price for '{name}' does not parse: give [IN, OUT] in USD per million tokens") from None
    return out


class Prices:
    """The table under the user's overrides; `price(model)` -> (in, out) per million tokens, or None."""

    def __init__(self, overrides: str | Mapping[str, Any] | None = None, table: Mapping[str, tuple[float, float]]
                 = PRICES):
        if overrides is None:
            overrides = os.environ.get("KERNELGATE_LLM_PRICES") or None
        self.table = {**table, **parse_prices(overrides)}

    def price(self, model: str) -> tuple[float, float] | None:
        for name in (model.lower(), model.lower().rsplit("/", 1)[-1]):   # then without a router's "openai/"
            best = max((k for k in self.table if name.startswith(k.lower())), key=len, default=None)
            if best is not None:
                return self.table[best]
        return None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        p = self.price(model)
        return None if p is None else (input_tokens * p[0] + output_tokens * p[1]) / 1e6


@dataclass
class Usage:
    """What one proposal cost: the requests behind it (retries included) and the time spent waiting."""

    model: str = ""
    requests: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0        # None: the model has no price
    wait_s: float = 0.0                 # seconds waiting for the model (requests and backoff)
    queue_s: float = 0.0                # seconds waiting for a free request slot (the concurrency cap)
    estimated: bool = False             # token counts estimated from characters

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["wait_s"] = round(self.wait_s, 3)
        d["queue_s"] = round(self.queue_s, 3)
        if self.cost_usd is not None:
            d["cost_usd"] = round(self.cost_usd, 6)
        return d


@dataclass(frozen=True)
class Limits:
    """Where the LLM proposer stops asking: requests, USD (priced models), tokens in and out."""

    max_requests: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None


class Spent(Exception):
    """A limit of the LLM budget is reached (the proposer stops asking and says so once)."""


@dataclass
class Ledger:
    """The run's totals, thread-safe."""

    requests: int = 0
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_tokens: int = 0
    wait_s: float = 0.0
    models: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, u: Usage, failure: str | None = None) -> None:
        with self._lock:
            self.requests += u.requests
            self.retries += u.retries
            self.input_tokens += u.input_tokens
            self.output_tokens += u.output_tokens
            if u.cost_usd is None:
                self.unpriced_tokens += u.input_tokens + u.output_tokens
            else:
                self.cost_usd += u.cost_usd
            self.wait_s += u.wait_s
            if u.model:
                self.models[u.model] = self.models.get(u.model, 0) + u.requests
            if failure:
                self.failures[failure] = self.failures.get(failure, 0) + 1

    def exhausted(self, limits: Limits | None) -> str | None:
        """Which limit is reached, or None."""
        if limits is None:
            return None
        with self._lock:
            if limits.max_requests is not None and self.requests >= limits.max_requests:
                return f"{self.requests} requests reached the limit of {limits.max_requests}"
            if limits.max_cost_usd is not None and self.cost_usd >= limits.max_cost_usd:
                return f"${self.cost_usd:.4f} reached the limit of ${limits.max_cost_usd:g}"
            if limits.max_tokens is not None and self.input_tokens + self.output_tokens >= limits.max_tokens:
                return f"{self.input_tokens + self.output_tokens} tokens reached the limit of {limits.max_tokens}"
        return None

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.requests, "retries": self.retries, "failures": dict(self.failures),
                    "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                    "cost_usd": round(self.cost_usd, 6), "unpriced_tokens": self.unpriced_tokens,
                    "wait_s": round(self.wait_s, 3), "models": dict(self.models)}

    def line(self) -> str:
        d = self.to_json()
        failed = sum(d["failures"].values())
        cost = f"${d['cost_usd']:.4f}" + (f" (+{d['unpriced_tokens']} unpriced tokens)" if d["unpriced_tokens"] else "")
        return (f"llm: {d['requests']} requests ({d['retries']} retried, {failed} failed), "
                f"{d['input_tokens']} tokens in / {d['output_tokens']} out, {cost}, {d['wait_s']:.1f} s waiting")


@dataclass
class Call:
    """One completion through the client: the reply (None when the request failed) and what it cost."""

    reply: Reply | None
    usage: Usage
    error: str = ""                   # why there is no reply
    kind: str = ""                    # the failed request's kind (RequestError.kind)


class Client:
    """A backend behind retries, backoff, timeouts, a concurrency cap, prices, the ledger and the limits."""

    def __init__(self, backend: Backend, *, prices: Prices | str | Mapping[str, Any] | None = None,
                 ledger: Ledger | None = None, limits: Limits | None = None, max_tokens: int = 8192,
                 timeout: float = 180.0, retries: int = 4, backoff: float = 2.0, backoff_max: float = 60.0,
                 retry_after_max: float = 120.0, concurrency: int = 2,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.backend = backend
        self.prices = prices if isinstance(prices, Prices) else Prices(prices)
        self.ledger = ledger if ledger is not None else Ledger()
        self.limits = limits
        self.max_tokens, self.timeout = max_tokens, timeout
        self.retries, self.backoff, self.backoff_max = retries, backoff, backoff_max
        self.retry_after_max = retry_after_max
        self.concurrency = max(1, concurrency)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._sleep = sleep
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"<Client {self.backend.describe()} x{self.concurrency}>"

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry `attempt` (0-based): the server's Retry-After when given (capped), else
        exponential backoff with jitter."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        return min(self.backoff_max, self.backoff * 2 ** attempt) * (0.5 + 0.5 * self._rng.random())

    def complete(self, messages: list[Message]) -> Call:
        """One completion, retried on 429 / 5xx; raises Spent at a limit, LLMError on a configuration
        problem; any other failure comes back as a Call with an error, counted in the ledger."""
        reason = self.ledger.exhausted(self.limits)
        if reason:
            raise Spent(reason)
        usage = Usage(model=self.backend.model)
        q0 = time.monotonic()
        with self._slots:
            t0 = time.monotonic()
            usage.queue_s = t0 - q0
            try:
                return self._attempts(messages, usage, t0)
            except LLMError:
                usage.wait_s = time.monotonic() - t0
                self.ledger.add(usage, "fatal")
                raise

    def _attempts(self, messages: list[Message], usage: Usage, t0: float) -> Call:
        attempt = 0
        while True:
            usage.requests += 1
            try:
                reply = self.backend.complete(messages, max_tokens=self.max_tokens, timeout=self.timeout)
            except RequestError as e:
                if e.retryable and attempt < self.retries:
                    usage.retries += 1
                    self._sleep(self.delay(attempt, e.retry_after))
                    attempt += 1
                    continue
                usage.wait_s = time.monotonic() - t0
                self.ledger.add(usage, e.kind)
                tries = f" after {attempt + 1} tries" if attempt else ""
                return Call(None, usage, f"{e}{tries}", e.kind)
            usage.model = reply.model or usage.model
            usage.input_tokens += reply.input_tokens
            usage.output_tokens += reply.output_tokens
            usage.estimated = usage.estimated or reply.estimated
            usage.cost_usd = self.prices.cost(usage.model, usage.input_tokens, usage.output_tokens)
            if usage.cost_usd is None:
                usage.cost_usd = self.prices.cost(self.backend.model, usage.input_tokens, usage.output_tokens)
            usage.wait_s = time.monotonic() - t0
            self.ledger.add(usage)
            return Call(reply, usage)
