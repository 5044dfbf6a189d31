"""LLMProposer against scripted servers and a command agent: candidates out of replies, each failure's reason
(build error lines, the measured error, no code) back to the same agent, an accepted candidate's time and
bottleneck, retries, timeouts, budgets, histories within their token budget, usage on every candidate."""
from __future__ import annotations

import random
import sys
from dataclasses import replace

import pytest
import torch

from kernelgate.proposers.llm import Agent, LLMError, LLMProposer, Limits
from kernelgate.proposers.llm import prompts
from kernelgate.records import Candidate, Evaluation, Reason
from llm_fakes import (BUILD_ERROR, CORRECT, FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, PROSE, REFERENCE, SECOND, WRONG,
                       accepted, rejected)

RNG = random.Random(0)
HINT = "fuse the ReLU into the multiply"
COMPILER = ("error building extension 'kg_relu'\n"
            + "".join(f"[{i}/3] c++ -O3 -c main.cpp (flags {i})\n" for i in range(12))
            + "main.cpp:1:42: error: 'foo' was not declared in this scope\n"
            "    1 | torch::Tensor f(torch::Tensor x) { return foo(x); }\n"
            "      |                                          ^~~\n"
            "ninja: build stopped: subcommand failed.\n")
KEYS = (FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY)


def proposer(url: str, **kw) -> LLMProposer:
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    kw.setdefault("agents", ("explorer",))
    kw.setdefault("hints", [HINT])
    return LLMProposer.from_args(f"openai:coder@{url}/v1", backoff=0.001, timeout=5.0,
                                 prices="coder=1/2", **kw)


def last_prompt(server) -> str:
    return server.requests[-1]["body"]["messages"][-1]["content"]


def run_candidate(c: Candidate) -> None:
    """The candidate file works as a file: ModelNew loads Model's weights and matches it."""
    ns: dict = {}
    exec(compile(c.source, "<candidate>", "exec"), ns)
    ref = ns["Model"](*ns["get_init_inputs"]())
    new = ns["ModelNew"](*ns["get_init_inputs"]())
    new.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(4, 8)
    torch.testing.assert_close(new(x), ref(x))


def test_the_engineer_loop_against_an_openai_server(openai_server, ctx):
    s = openai_server
    p = proposer(s.url)
    # 1. a correct kernel
    s.add(("reply", CORRECT, (1000, 200)))
    [c1] = p.propose(ctx, RNG, 2)
    assert c1.proposer == "llm" and c1.strategy == "llm:explorer-1:explore" and c1.parent is None
    assert c1.source.startswith(REFERENCE.rstrip()) and c1.language == "torch"
    run_candidate(c1)
    assert c1.usage["input_tokens"] == 1000 and c1.usage["output_tokens"] == 200 and c1.usage["requests"] == 1
    assert c1.usage["cost_usd"] == pytest.approx((1000 * 1 + 200 * 2) / 1e6) and c1.usage["wait_s"] >= 0
    first = s.requests[0]["body"]["messages"]
    assert first[0]["role"] == "system" and "class ModelNew" in first[0]["content"]
    assert "load_state_dict(strict=True)" in first[0]["content"] and "0.05 ms" in first[0]["content"]
    assert "cores: 2" in first[0]["content"] and "load_inline" in first[0]["content"]
    assert "new approach" in first[-1]["content"]

    # 2. accepted, with its time and bottleneck -> reaches the same agent; it replies with a build error
    ctx = replace(ctx, history=(accepted(c1, 0.04, insight={"bottleneck": "memory-bound: 81% of bandwidth",
                                                             "kernels_per_forward": 2.0, "gap_share": 0.2}),))
    s.add(("reply", BUILD_ERROR))
    [c2] = p.propose(ctx, RNG, 2)
    assert "was accepted: 0.04 ms per call, 1.25x" in last_prompt(s)
    assert "memory-bound: 81% of bandwidth" in last_prompt(s) and "2 kernels per forward" in last_prompt(s)
    assert c2.language == "cpp" and c2.strategy == "llm:explorer-1:explore"

    # 3. its build error goes back to it with the compiler's error lines; it replies with a wrong result
    ctx = replace(ctx, history=ctx.history + (rejected(c2, Reason.BUILD_ERROR, "build: error building extension",
                                                        "build", COMPILER),))
    s.add(("reply", WRONG))
    [c3] = p.propose(ctx, RNG, 2)
    fix = last_prompt(s)
    assert "rejected: build_error" in fix and "'foo' was not declared in this scope" in fix and "^~~" in fix
    assert "(flags 3)" not in fix                          # the noise between is cut
    assert "Fix it" in fix and c3.parent == c2.id and c3.strategy == "llm:explorer-1:fix"
    msgs = s.requests[-1]["body"]["messages"]
    assert any(m["role"] == "assistant" and m["content"] == BUILD_ERROR for m in msgs)   # the same conversation

    # 4. the wrong result goes back with the measured error; it replies with prose
    ctx = replace(ctx, history=ctx.history + (rejected(c3, Reason.MISMATCH, "trial 2 (normal): max err 1.0e+00",
                                                        "trial 2 (normal)",
                                                        "float32[4, 8]: max err 1.0e+00 (allowed 2.4e-07)"),))
    s.add(("reply", PROSE))
    assert p.propose(ctx, RNG, 2) == []
    assert "max err 1.0e+00 (allowed 2.4e-07)" in last_prompt(s) and "mismatch" in last_prompt(s)
    assert p.attempts[-1].outcome == "no_code" and "prose only" in p.attempts[-1].reason

    # 5. the missing code goes back; a 429 then a candidate
    s.add(("status", 429, {"Retry-After": "0"}), ("reply", SECOND, (50, 50)))
    [c5] = p.propose(ctx, RNG, 2)
    assert "no usable code" in last_prompt(s) and c5.usage["retries"] == 1 and c5.usage["requests"] == 2
    run_candidate(c5)

    # 6. a timeout: no candidate, recorded
    p.client.timeout = 0.3
    s.add(("sleep", 2.0, CORRECT))
    assert p.propose(ctx, RNG, 2) == []
    assert p.attempts[-1].outcome == "request_failed" and "no reply within 0.3 s" in p.attempts[-1].reason

    # hints in every request; accounting adds up; no key anywhere
    assert all(HINT in r["body"]["messages"][0]["content"] for r in s.requests)
    led = p.summary()["totals"]
    assert led["requests"] == len(s.requests) == 7 and led["retries"] == 1 and led["failures"] == {"timeout": 1}
    assert led["input_tokens"] == 1000 + 100 + 100 + 100 + 50
    outcomes = p.summary()["outcomes"]
    assert outcomes == {"candidate": 4, "no_code": 1, "request_failed": 1}
    text = repr(p) + str(p.summary()) + "".join(str(c.to_json()) for c in (c1, c2, c3, c5))
    assert not any(k in text for k in KEYS)


def test_usage_travels_with_the_candidate_record(openai_server, ctx):
    openai_server.add(("reply", CORRECT))
    [c] = proposer(openai_server.url).propose(ctx, RNG, 1)
    again = Candidate.from_json(c.to_json())
    assert again == c and again.usage == c.usage and again.usage["model"] == "coder"
    e = Evaluation.from_json(accepted(c, 0.04).to_json())
    assert e.candidate.usage == c.usage
    assert Candidate.from_json({k: v for k, v in c.to_json().items() if k != "usage"}).usage is None


def test_refiner_gets_the_best_with_its_code_and_an_explorer_its_failure(openai_server, ctx):
    s = openai_server
    p = proposer(s.url, agents=("explorer", "refiner"), concurrency=1)      # one at a time: replies in order
    s.add(("reply", SECOND), ("reply", CORRECT))
    ex, rf = p.propose(ctx, RNG, 2)
    assert (ex.strategy, rf.strategy) == ("llm:explorer-1:explore", "llm:refiner-1:explore")   # no best yet
    best = accepted(rf, 0.04, insight={"bottleneck": "launch-bound: 3 kernels"})
    ctx = replace(ctx, history=(rejected(ex, Reason.STRIDE, "stride: output strides differ", "trial 1",
                                         "strides (1, 4) vs (8, 1)"), best))
    s.add(("reply", WRONG), ("reply", WRONG.replace("2.0", "3.0")))
    fixed, refined = p.propose(ctx, RNG, 2)
    fix, refine = (r["body"]["messages"][-1]["content"] for r in s.requests[2:])
    assert "strides (1, 4) vs (8, 1)" in fix and ".contiguous()" in fix and "Fix it" in fix
    assert (fixed.strategy, fixed.parent) == ("llm:explorer-1:fix", ex.id)
    assert "The current best candidate" in refine and "clamp_min" in refine and "0.04 ms" in refine
    assert "launch-bound: 3 kernels" in refine and "was accepted" in refine      # its own, with the figures
    assert (refined.strategy, refined.parent) == ("llm:refiner-1:refine", rf.id)
    assert "strides (1, 4)" in refine                      # recent failures reach every agent


def test_with_fewer_slots_than_agents_each_gets_its_go(openai_server, ctx):
    s = openai_server
    p = proposer(s.url, agents=("explorer", "refiner"))
    s.add(("reply", CORRECT), ("reply", SECOND))
    a, b = p.propose(ctx, RNG, 1) + p.propose(ctx, RNG, 1)
    assert (a.strategy, b.strategy) == ("llm:explorer-1:explore", "llm:refiner-1:explore")


def test_duplicates_are_recorded_and_sent_back(openai_server, ctx):
    s = openai_server
    p = proposer(s.url)
    s.add(("reply", CORRECT), ("reply", CORRECT), ("reply", SECOND))
    [c] = p.propose(ctx, RNG, 1)
    ctx = replace(ctx, history=(accepted(c, 0.04),))
    assert p.propose(ctx, RNG, 1) == []
    assert p.attempts[-1].outcome == "duplicate" and c.strategy in p.attempts[-1].reason
    assert len(p.propose(ctx, RNG, 1)) == 1 and "identical to a candidate already tried" in last_prompt(s)


def test_fixes_stop_after_max_fixes(openai_server, ctx):
    s = openai_server
    p = proposer(s.url, max_fixes=1)
    s.add(("reply", CORRECT), ("reply", SECOND), ("reply", WRONG))
    [c1] = p.propose(ctx, RNG, 1)
    ctx = replace(ctx, history=(rejected(c1, Reason.CRASH, "forward: RuntimeError", "forward", "RuntimeError: x"),))
    [c2] = p.propose(ctx, RNG, 1)
    assert c2.strategy.endswith(":fix")
    ctx = replace(ctx, history=ctx.history + (rejected(c2, Reason.CRASH, "forward: RuntimeError", "forward",
                                                       "RuntimeError: y"),))
    [c3] = p.propose(ctx, RNG, 1)
    assert c3.strategy.endswith(":explore") and "leave that approach" in last_prompt(s)


def test_history_is_trimmed_to_its_token_budget_and_code_is_resent(ctx):
    a = Agent("explorer-1", "explorer", history_tokens=300)
    for i in range(10):
        a.remember(f"request {i} " + "x" * 200, f"reply {i} " + "y" * 200, candidate=f"c{i}")
    assert a.tokens() <= 300 and a.turns[-1].text.startswith("reply 9") and a.turns[0].role == "user"
    assert not a.has_reply_for("c0") and a.has_reply_for("c9")
    msgs = a.messages("SYS", "now")
    assert msgs[0] == {"role": "system", "content": "SYS"} and msgs[-1] == {"role": "user", "content": "now"}
    c = Candidate("abc", "llm:explorer-1:explore", REFERENCE + "\n\n# ---- kernelgate strategy: x ----\nBODY = 1\n")
    e = rejected(c, Reason.CRASH, "forward: boom", "forward", "RuntimeError: boom")
    assert "BODY = 1" in prompts.fix_prompt(e, ctx, with_code=True) and "class Model" not in \
        prompts.fix_prompt(e, ctx, with_code=True)


def test_budget_and_unreachable_endpoint_stop_the_proposer(openai_server, closed_port, ctx):
    s = openai_server
    p = proposer(s.url, limits=Limits(max_requests=1))
    s.add(("reply", CORRECT), ("reply", SECOND))
    assert len(p.propose(ctx, RNG, 1)) == 1
    assert p.propose(ctx, RNG, 1) == [] and "1 requests reached the limit" in p.stopped
    assert p.propose(ctx, RNG, 1) == [] and len(s.requests) == 1 and len(p.notes) == 1
    q = proposer(f"http://127.0.0.1:{closed_port}")
    assert q.propose(ctx, RNG, 1) == [] and "cannot reach" in q.stopped and q.attempts[-1].outcome == "stopped"


def test_check_fails_fast_in_one_line_and_names_an_unlisted_model(openai_server, closed_port):
    assert proposer(openai_server.url).check().startswith("llm: openai:coder@")
    openai_server.models = ["other-model"]
    p = proposer(openai_server.url)
    assert "lists no model 'coder'; it lists: other-model" in p.check() and len(p.notes) == 1
    openai_server.models_status = 401
    with pytest.raises(LLMError, match="refused the request.*OPENAI_API_KEY"):
        proposer(openai_server.url).check()
    with pytest.raises(LLMError, match="cannot reach"):
        proposer(f"http://127.0.0.1:{closed_port}").check()
    assert not any(r["body"] for r in openai_server.requests)           # no completion was asked for


def test_anthropic_backend_proposes(anthropic_server, ctx):
    pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install 'kernelgate[llm]')")
    anthropic_server.add(("reply", CORRECT, (10, 20)))
    p = LLMProposer.from_args(f"anthropic:claude-sonnet-4-5@{anthropic_server.url}", agents=("explorer",),
                              hints=[HINT])
    [c] = p.propose(ctx, RNG, 1)
    run_candidate(c)
    assert p.check().startswith("llm: anthropic:claude-sonnet-4-5@")     # the model list: no tokens
    body = anthropic_server.requests[0]["body"]
    assert HINT in body["system"] and "class ModelNew" in body["system"]
    assert c.usage["cost_usd"] == pytest.approx((10 * 3 + 20 * 15) / 1e6)


AGENT = r'''
import os, sys
prompt = sys.stdin.read()
leaked = [k for k in os.environ if k.endswith("_API_KEY") or k.endswith("_TOKEN")]
if leaked:
    print("I can see " + ",".join(leaked))
elif "Fix it" in prompt and "was not declared" in prompt:
    print("Fixed:\n```python\nclass ModelNew(Model):\n    def forward(self, x):\n"
          "        return torch.relu(x * self.scale) + 1.0\n```")
else:
    print(open(sys.argv[1]).read())
'''


def test_command_agent_proposes_fixes_and_sees_no_keys(tmp_path, ctx):
    agent, reply = tmp_path / "agent.py", tmp_path / "reply.txt"
    agent.write_text(AGENT)
    reply.write_text(BUILD_ERROR)
    p = LLMProposer.from_args(cmd=f"{sys.executable} {agent} {reply}", agents=("explorer",), hints=[HINT])
    [c1] = p.propose(ctx, RNG, 1)
    assert c1.language == "cpp" and c1.usage["estimated"] and c1.usage["cost_usd"] is None
    ctx = replace(ctx, history=(rejected(c1, Reason.BUILD_ERROR, "build: error", "build", COMPILER),))
    [c2] = p.propose(ctx, RNG, 1)
    assert c2.parent == c1.id and c2.strategy.endswith(":fix")
    run_candidate(c2)
