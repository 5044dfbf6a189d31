"""The backends against scripted local servers (OpenAI-compatible and Anthropic-style) and a command agent:
replies, token counts, retries on 429 / 5xx, timeouts, one-line configuration errors, no key in sight."""
from __future__ import annotations

import os
import sys
import time

import pytest

from kernelgate.errors import MissingExtra
from kernelgate.proposers.llm import (AnthropicBackend, Client, CommandBackend, LLMError, OpenAIBackend,
                                      RequestError, agent_env, make_backend, parse_spec)
from kernelgate.sandbox.host import scrubbed_env
from llm_fakes import CORRECT, FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write ModelNew"}]
KEYS = (FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY)


def no_key_in(*things) -> bool:
    text = " ".join(repr(t) + str(t) for t in things)
    return not any(k in text for k in KEYS)


# ------------------------------------------------------------------ specs (no SDK needed)

def test_spec_forms():
    assert str(parse_spec("openai:qwen@http://localhost:8000/v1")) == "openai:qwen@http://localhost:8000/v1"
    s = parse_spec("qwen-coder@https://host/v1")
    assert (s.kind, s.model, s.url) == ("openai", "qwen-coder", "https://host/v1")
    assert parse_spec("anthropic:claude-sonnet-4-5").kind == "anthropic"
    assert parse_spec(None, endpoint="http://h/v1", model="m") == parse_spec("openai:m@http://h/v1")
    assert parse_spec("cmd:my-agent --print").command == "my-agent --print"
    assert parse_spec(None, cmd="my-agent --print").kind == "cmd"
    assert parse_spec("vertex-model@2024").model == "vertex-model@2024"      # an @ not before a URL stays
    assert parse_spec(None) is None


@pytest.mark.parametrize("args,match", [
    ({"endpoint": "http://h/v1"}, "--llm-model"),
    ({"llm": "openai:a", "model": "b"}, "give one"),
    ({"llm": "openai:a@http://x/v1", "endpoint": "http://y/v1"}, "give one"),
    ({"llm": "m", "cmd": "agent"}, "--llm-cmd"),
    ({"llm": "anthropic:"}, "no model"),
    ({"llm": "cmd:"}, "needs a command"),
])
def test_spec_errors_are_one_line(args, match):
    with pytest.raises(LLMError, match=match) as e:
        parse_spec(args.pop("llm", None), **args)
    assert "\n" not in str(e.value)


def test_missing_sdk_names_the_package_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtra, match=r"'openai'.*pip install 'kernelgate\[llm\]'"):
        OpenAIBackend("m", "http://127.0.0.1:1/v1")
    with pytest.raises(MissingExtra, match=r"'anthropic'.*kernelgate\[llm\]"):
        AnthropicBackend("m")


def test_candidate_workers_get_no_keys(tmp_path, monkeypatch):
    """The gate's worker environment (sandbox/host.py) drops the keys the backends read."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "HF_TOKEN", "MY_SECRET"):
        monkeypatch.setenv(var, "secret-value-123456")
    env = scrubbed_env(tmp_path)
    assert not any(v == "secret-value-123456" for v in env.values())
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env


# ------------------------------------------------------------------ OpenAI-compatible

def test_openai_reply_tokens_and_key_handling(openai_server):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    openai_server.add(("reply", CORRECT, (321, 123)))
    b = make_backend(parse_spec(f"openai:coder@{openai_server.url}/v1"))
    r = b.complete(MSGS, max_tokens=256, timeout=10)
    assert r.text == CORRECT and (r.input_tokens, r.output_tokens) == (321, 123) and r.model == "coder"
    assert not r.estimated and r.finish == "stop"
    req = openai_server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["body"]["messages"] == MSGS
    assert req["body"]["max_tokens"] == 256
    assert req["headers"].get("authorization") == f"Bearer {FAKE_OPENAI_KEY}"   # the key goes to the server only
    assert no_key_in(b, b.describe(), vars(b).get("url"))


def test_openai_local_server_needs_no_key(openai_server, monkeypatch):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url + "/v1")
    openai_server.add(("reply", "hello"))
    assert OpenAIBackend("coder").complete(MSGS, max_tokens=16, timeout=10).text == "hello"
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(LLMError, match="OPENAI_API_KEY is not set"):
        OpenAIBackend("gpt-4o")


def test_openai_429_then_success_with_retry_after(openai_server):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    openai_server.add(("status", 429, {"Retry-After": "2"}), ("status", 503, {}), ("reply", "done", (10, 5)))
    sleeps: list[float] = []
    c = Client(OpenAIBackend("coder", openai_server.url + "/v1"), backoff=0.001, sleep=sleeps.append)
    call = c.complete(MSGS)
    assert call.reply is not None and call.reply.text == "done"
    assert len(openai_server.requests) == 3 and call.usage.requests == 3 and call.usage.retries == 2
    assert sleeps[0] == 2.0 and sleeps[1] <= 0.002                 # Retry-After, then the tiny backoff (2nd try)
    assert (call.usage.input_tokens, call.usage.output_tokens) == (10, 5)


def test_openai_timeout_is_one_failed_request(openai_server):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    openai_server.add(("sleep", 3.0, "late"))
    c = Client(OpenAIBackend("coder", openai_server.url + "/v1"), timeout=0.4, backoff=0.001)
    t0 = time.monotonic()
    call = c.complete(MSGS)
    assert time.monotonic() - t0 < 2.5
    assert call.reply is None and call.kind == "timeout" and "0.4 s" in call.error
    assert c.ledger.failures == {"timeout": 1} and len(openai_server.requests) == 1


def test_openai_unreachable_and_refused_key_are_one_line(openai_server, closed_port):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    url = f"http://127.0.0.1:{closed_port}/v1"
    with pytest.raises(LLMError, match=r"cannot reach .*--llm-endpoint / OPENAI_BASE_URL") as e:
        OpenAIBackend("coder", url).complete(MSGS, max_tokens=8, timeout=5)
    assert "\n" not in str(e.value) and no_key_in(str(e.value))
    openai_server.add(("status", 401, {}))
    with pytest.raises(LLMError, match="set OPENAI_API_KEY to a key it accepts") as e:
        OpenAIBackend("coder", openai_server.url + "/v1").complete(MSGS, max_tokens=8, timeout=5)
    assert no_key_in(str(e.value))


def test_openai_client_errors_are_recorded_not_retried(openai_server):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    openai_server.add(("status", 400, {}))
    sleeps: list[float] = []
    call = Client(OpenAIBackend("coder", openai_server.url + "/v1"), sleep=sleeps.append).complete(MSGS)
    assert call.reply is None and "HTTP 400" in call.error and sleeps == []


# ------------------------------------------------------------------ Anthropic

@pytest.mark.slow
def test_anthropic_reply_system_and_key(anthropic_server):
    pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install 'kernelgate[llm]')")
    anthropic_server.add(("status", 429, {"retry-after": "1"}), ("reply", CORRECT, (77, 33)))
    sleeps: list[float] = []
    b = make_backend(parse_spec(f"anthropic:claude-test@{anthropic_server.url}"))
    call = Client(b, backoff=0.001, sleep=sleeps.append).complete(MSGS)
    assert call.reply.text == CORRECT and (call.usage.input_tokens, call.usage.output_tokens) == (77, 33)
    assert sleeps == [1.0] and call.usage.retries == 1
    req = anthropic_server.requests[-1]
    assert req["path"] == "/v1/messages" and req["body"]["system"] == "be brief"
    assert req["body"]["messages"] == [{"role": "user", "content": "write ModelNew"}]
    sent = req["headers"].get("x-api-key") or req["headers"].get("authorization", "").removeprefix("Bearer ")
    assert sent == FAKE_ANTHROPIC_KEY and no_key_in(b, b.describe())      # to the server only


def test_anthropic_needs_a_key_for_the_hosted_api(monkeypatch, anthropic_server):
    pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install 'kernelgate[llm]')")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicBackend("claude-sonnet-4-5")
    anthropic_server.add(("reply", "ok"))
    assert AnthropicBackend("m", anthropic_server.url).complete(MSGS, max_tokens=8, timeout=10).text == "ok"


def test_anthropic_timeout(anthropic_server):
    pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install 'kernelgate[llm]')")
    anthropic_server.add(("sleep", 3.0, "late"))
    call = Client(AnthropicBackend("m", anthropic_server.url), timeout=0.4).complete(MSGS)
    assert call.reply is None and call.kind == "timeout"


# ------------------------------------------------------------------ a command

AGENT = r'''
import os, sys
prompt = sys.stdin.read()
leaked = sorted(k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN", "_HEADERS")))
print("keys seen: " + ",".join(leaked))
print("prompt chars: %d" % len(prompt))
print("```python\nclass ModelNew(Model):\n    pass\n```")
'''


def test_command_agent_reads_stdin_and_sees_no_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret-123456789")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "Authorization: Bearer abcdefgh123")
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    b = make_backend(parse_spec(cmd=f"{sys.executable} {script}"))
    r = b.complete(MSGS, max_tokens=100, timeout=30)
    assert "keys seen: \n" in r.text and "prompt chars: " in r.text and r.estimated and r.input_tokens > 0
    assert "be brief" not in r.text                    # the prompt went in, not out
    env = agent_env()
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env and "PATH" in env
    assert "ANTHROPIC_CUSTOM_HEADERS" not in env
    assert "OPENAI_API_KEY" in agent_env(keep=("OPENAI_API_KEY",))


def test_command_agent_timeout_exit_and_missing_program(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    t0 = time.monotonic()
    with pytest.raises(RequestError, match="no reply within 0.5 s") as e:
        CommandBackend(f"{sys.executable} {slow}").complete(MSGS, max_tokens=8, timeout=0.5)
    assert e.value.kind == "timeout" and time.monotonic() - t0 < 10
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nsys.stderr.write('model overloaded\\n')\nsys.exit(3)\n")
    with pytest.raises(RequestError, match="status 3: model overloaded"):
        CommandBackend(f"{sys.executable} {bad}").complete(MSGS, max_tokens=8, timeout=10)
    with pytest.raises(LLMError, match="not an executable on PATH"):
        CommandBackend("no-such-agent-xyz --print")
    with pytest.raises(LLMError, match="does not parse"):
        CommandBackend("agent 'unclosed")


def test_transcript_marks_turns():
    from kernelgate.proposers.llm.backends import transcript
    t = transcript([{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
                    {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}])
    assert t.index("S") < t.index("earlier request") < t.index("your earlier reply") < t.index("----- request")
    assert transcript([{"role": "user", "content": "only"}]) == "only\n"
    assert os.linesep == "\n"
