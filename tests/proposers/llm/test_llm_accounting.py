"""Prices, usage, the ledger, limits, and the client's retries, backoff, timeouts and concurrency cap
(against a fake backend: no SDK, no server)."""
from __future__ import annotations

import json
import threading
import time

import pytest

from kernelgate.proposers.llm import (Client, Ledger, Limits, LLMError, Prices, Reply, RequestError, Spent,
                                      parse_prices)


class Fake:
    """A backend replaying outcomes: a Reply's text, or an exception to raise."""

    kind = "fake"
    model = "gpt-4o-mini"

    def __init__(self, *outcomes, delay: float = 0.0):
        self.outcomes = list(outcomes)
        self.delay = delay
        self.calls = 0
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.timeouts: list[float] = []

    def describe(self) -> str:
        return "fake"

    def complete(self, messages, *, max_tokens, timeout):
        with self.lock:
            self.calls += 1
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.timeouts.append(timeout)
            out = self.outcomes.pop(0) if self.outcomes else "```python\nclass ModelNew: pass\n```"
        try:
            time.sleep(self.delay)
            if isinstance(out, BaseException):
                raise out
            return Reply(out, 1000, 500, self.model, self.delay)
        finally:
            with self.lock:
                self.active -= 1


MSG = [{"role": "user", "content": "hi"}]


def client(backend, **kw):
    sleeps: list[float] = []
    kw.setdefault("backoff", 0.01)
    c = Client(backend, sleep=sleeps.append, **kw)
    return c, sleeps


def test_prices_table_prefix_override_and_unpriced():
    p = Prices()
    assert p.price("gpt-4o-mini-2024-07-18") == (0.15, 0.60)     # longest prefix: not gpt-4o's
    assert p.price("gpt-4o-2024-08-06") == (2.50, 10.00)
    assert p.price("openai/gpt-4o") == (2.50, 10.00)             # a router's provider prefix
    assert p.price("qwen-coder") is None and p.cost("qwen-coder", 10, 10) is None
    p = Prices("qwen-coder=0.2/0.6, gpt-4o=1/2")
    assert p.price("qwen-coder-32b") == (0.2, 0.6) and p.price("gpt-4o") == (1.0, 2.0)
    assert p.cost("gpt-4o", 1_000_000, 500_000) == pytest.approx(2.0)


def test_prices_from_files_and_the_environment(tmp_path, monkeypatch):
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"local-model": [0, 0], "big": {"input": 3, "output": 9}}))
    assert parse_prices(str(j)) == {"local-model": (0.0, 0.0), "big": (3.0, 9.0)}
    t = tmp_path / "p.toml"
    t.write_text('"my-model" = [1.5, 4.5]\n')
    assert parse_prices(str(t)) == {"my-model": (1.5, 4.5)}
    monkeypatch.setenv("KERNELGATE_LLM_PRICES", "env-model=7/8")
    assert Prices().price("env-model") == (7.0, 8.0)
    with pytest.raises(LLMError, match="MODEL=IN/OUT"):
        parse_prices("gpt-4o=cheap")


def test_usage_ledger_and_cost():
    c, _ = client(Fake("a", "b"))
    calls = [c.complete(MSG), c.complete(MSG)]
    u = calls[0].usage
    assert (u.requests, u.retries, u.input_tokens, u.output_tokens) == (1, 0, 1000, 500)
    assert u.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    led = c.ledger.to_json()
    assert led["requests"] == 2 and led["input_tokens"] == 2000 and led["output_tokens"] == 1000
    assert led["cost_usd"] == pytest.approx(2 * u.cost_usd, abs=1e-6) and led["models"] == {"gpt-4o-mini": 2}
    assert "2 requests" in c.ledger.line()


def test_429_with_retry_after_is_respected_then_succeeds():
    c, sleeps = client(Fake(RequestError("http", "HTTP 429", status=429, retry_after=3.0, retryable=True), "ok"))
    call = c.complete(MSG)
    assert call.reply is not None and call.reply.text == "ok"
    assert sleeps == [3.0] and call.usage.requests == 2 and call.usage.retries == 1
    assert c.ledger.retries == 1 and not c.ledger.failures


def test_5xx_backs_off_exponentially_and_gives_up_after_the_retries():
    errs = [RequestError("http", "HTTP 503", status=503, retryable=True) for _ in range(4)]
    c, sleeps = client(Fake(*errs), retries=3, backoff=1.0, backoff_max=100.0)
    call = c.complete(MSG)
    assert call.reply is None and call.kind == "http" and "after 4 tries" in call.error
    assert len(sleeps) == 3
    for k, s in enumerate(sleeps):                     # backoff * 2**k, with jitter in [0.5, 1]
        assert 0.5 * 2 ** k <= s <= 2 ** k
    assert c.ledger.failures == {"http": 1} and c.ledger.requests == 4


def test_retry_after_is_capped_and_backoff_bounded():
    c, _ = client(Fake(), backoff=1.0, backoff_max=5.0, retry_after_max=10.0)
    assert c.delay(0, 600.0) == 10.0
    assert c.delay(20, None) <= 5.0


def test_client_errors_and_timeouts_are_not_retried():
    c, sleeps = client(Fake(RequestError("http", "HTTP 400: bad", status=400)))
    assert c.complete(MSG).reply is None and sleeps == []
    c, sleeps = client(Fake(RequestError("timeout", "no reply within 2 s")), timeout=2.0)
    call = c.complete(MSG)
    assert call.kind == "timeout" and sleeps == [] and c.backend.timeouts == [2.0]


def test_configuration_errors_propagate_and_are_counted():
    c, _ = client(Fake(LLMError("cannot reach http://x: start the server")))
    with pytest.raises(LLMError, match="start the server"):
        c.complete(MSG)
    assert c.ledger.failures == {"fatal": 1}


@pytest.mark.parametrize("limits,ok", [(Limits(max_requests=2), 2), (Limits(max_tokens=3000), 2),
                                       (Limits(max_cost_usd=0.0005), 2)])
def test_limits_stop_requests(limits, ok):
    c, _ = client(Fake(), limits=limits)
    done = 0
    with pytest.raises(Spent):
        for _ in range(5):
            c.complete(MSG)
            done += 1
    assert done == ok


def test_the_concurrency_cap_holds():
    backend = Fake(*["x"] * 6, delay=0.05)
    c, _ = client(backend, concurrency=2)
    threads = [threading.Thread(target=c.complete, args=(MSG,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backend.calls == 6 and backend.peak == 2


def test_an_unpriced_model_is_not_counted_free():
    backend = Fake("x")
    backend.model = "local-coder"
    c, _ = client(backend)
    call = c.complete(MSG)
    assert call.usage.cost_usd is None and c.ledger.unpriced_tokens == 1500 and "unpriced" in c.ledger.line()
    assert isinstance(Ledger().to_json(), dict)
