"""optimize's proposer flags: --proposer, --llm*, --hint/--hints; what reaches api.optimize, and bad values as
usage errors (exit 2, one line)."""
import json

import pytest

from kernelgate import cli
from kernelgate.cli import main
from kernelgate.proposers.llm import Limits, LLMProposer

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
    def forward(self, x):
        return torch.relu(self.lin(x))
def get_inputs():
    return [torch.randn(64, 32)]
def get_init_inputs():
    return [32]
"""

DOC = {"best_strategy": "baseline:eager", "best_ms": 1.0, "baseline_kind": "eager", "baseline_ms": 1.0,
       "speedup": 1.0, "speedup_ci": [1.0, 1.0], "speedup_claimed": False, "candidates": 0, "accepted": 0,
       "seconds": 1.0, "evaluations": []}


class _Result:
    def to_json(self):
        return dict(DOC)


@pytest.fixture
def captured(monkeypatch):
    """api.optimize with the proposers / llm / hints keywords, recording what the CLI passes."""
    calls = []

    def optimize(model, *, target="cpu", budget=300, max_candidates=64, out="out", seed=0, resume=False,
                 contract=None, inputs=None, config=None, store=None, progress=None, search_config=None,
                 force=False, proposers=("builtin",), llm=None, hints=(), languages=None):
        calls.append({"model": model, "proposers": proposers, "llm": llm, "hints": hints})
        if languages is not None:
            calls[-1]["languages"] = languages
        return _Result()
    monkeypatch.setattr(cli.api, "optimize", optimize)
    return calls


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_default_is_the_builtin_library_alone(write, capsys, captured):
    rc, out, _ = run(capsys, "optimize", write("ref.py", REF), "--json")
    assert rc == 0 and json.loads(out)["best_strategy"] == "baseline:eager"
    assert captured == [{"model": captured[0]["model"], "proposers": ("builtin",), "llm": None, "hints": ()}]


def test_proposer_builtin_is_the_default_unchanged(write, capsys, captured):
    ref = write("ref.py", REF)
    run(capsys, "optimize", ref, "--json")
    run(capsys, "optimize", ref, "--json", "--proposer", "builtin", "--force")
    assert captured[0] == captured[1]


def test_an_llm_set_by_a_flag_joins_the_library(write, capsys, captured):
    rc, _, _ = run(capsys, "optimize", write("ref.py", REF), "--llm", "openai:qwen-coder@http://localhost:8000/v1",
                   "--json")
    assert rc == 0
    assert captured[0]["proposers"] == ("builtin", "llm")
    assert captured[0]["llm"] == {"llm": "openai:qwen-coder@http://localhost:8000/v1"}


def test_endpoint_model_prices_limits_and_hints_reach_the_api(write, capsys, captured, tmp_path):
    hints = tmp_path / "hints.md"
    hints.write_text("# Hints\n\nThe linear layer is memory-bound at this size.\n\n- keep fp32\n")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"other-model": [0.5, 1.5]}))
    rc, _, _ = run(capsys, "optimize", write("ref.py", REF), "--proposer", "llm", "--llm-endpoint",
                   "http://localhost:8000/v1", "--llm-model", "qwen-coder", "--llm-price", "qwen-coder=0.2/0.6",
                   "--llm-price", str(prices), "--llm-max-cost", "2.5", "--llm-max-requests", "40",
                   "--hint", "fuse the relu into the GEMM epilogue", "--hints", str(hints), "--json")
    assert rc == 0
    c = captured[0]
    assert c["proposers"] == ("llm",)
    assert c["llm"] == {"endpoint": "http://localhost:8000/v1", "model": "qwen-coder",
                        "prices": {"qwen-coder": (0.2, 0.6), "other-model": (0.5, 1.5)},
                        "limits": Limits(max_requests=40, max_cost_usd=2.5)}
    assert c["hints"] == ("fuse the relu into the GEMM epilogue",      # the file's text is one hint
                          "# Hints\n\nThe linear layer is memory-bound at this size.\n\n- keep fp32")


def test_llm_agents_choose_the_roles_the_supervisor_included(write, capsys, captured):
    run(capsys, "optimize", write("ref.py", REF), "--llm-cmd", "cat -", "--llm-agents", "explorer,supervisor", "--json")
    c = captured[0]
    assert c["llm"]["agents"] == ("explorer", "supervisor")
    p = LLMProposer.from_args(**c["llm"])
    assert sorted(a.role for a in p.agents) == ["explorer", "supervisor"]


def test_the_llm_keywords_are_what_llmproposer_from_args_takes(write, capsys, captured):
    """The dictionary the CLI passes builds a proposer (the command backend needs no SDK and no key)."""
    run(capsys, "optimize", write("ref.py", REF), "--llm-cmd", "cat -", "--llm-max-requests", "3",
        "--llm-price", "my-agent=1/2", "--hint", "h", "--json")
    c = captured[0]
    assert c["proposers"] == ("builtin", "llm") and c["llm"]["cmd"] == "cat -"
    p = LLMProposer.from_args(**c["llm"], hints=c["hints"])
    assert isinstance(p, LLMProposer) and p.hints == ["h"]
    assert p.client.limits.max_requests == 3 and p.client.prices.price("my-agent") == (1.0, 2.0)


def test_an_llm_left_out_by_proposer_is_not_used_and_said_so(write, capsys, captured):
    rc, _, err = run(capsys, "optimize", write("ref.py", REF), "--proposer", "builtin", "--llm", "anthropic:claude-x",
                     "--json")
    assert rc == 0 and captured[0]["proposers"] == ("builtin",) and captured[0]["llm"] is None
    assert "anthropic:claude-x" in err and "not used" in err


def test_the_text_output_has_the_llm_line(write, capsys, monkeypatch):
    doc = {**DOC, "llm": {"backend": "cmd:agent", "stopped": "3 requests reached the limit of 3",
                          "totals": {"requests": 3, "input_tokens": 1200, "output_tokens": 800, "cost_usd": 0.0123,
                                     "unpriced_tokens": 0}}}

    class Result:
        def to_json(self):
            return doc

    def optimize(model, *, proposers=("builtin",), llm=None, hints=(), **kw):
        assert llm == {"cmd": "cat"}
        return Result()
    monkeypatch.setattr(cli.api, "optimize", optimize)
    rc, out, _ = run(capsys, "optimize", write("ref.py", REF), "--llm-cmd", "cat")
    assert rc == 0
    assert ("llm (cmd:agent): 3 requests, 1200 tokens in / 800 out, $0.0123; stopped: 3 requests reached the limit "
            "of 3") in out.splitlines()


@pytest.mark.parametrize("argv, words", [
    (["--proposer", "llm"], "--proposer llm needs a model: set --llm SPEC"),
    (["--proposer", "builtin,agent"], "unknown proposer agent; known: builtin, llm"),
    (["--proposer", ","], "names no proposer"),
    (["--hints", "MISSING"], "no such file"),
    (["--hints", "DIR"], "not a file"),
    (["--hints", "EMPTY"], "is empty"),
    (["--hint", " "], "--hint is empty"),
    (["--llm-endpoint", "http://localhost:8000/v1"], "add --llm-model NAME"),
    (["--llm-cmd", "agent", "--llm", "anthropic:m"], "--llm-cmd names the agent by itself"),
    (["--llm", "anthropic:"], "no model named"),
    (["--llm", "m", "--llm-price", "m=cheap"], "does not parse"),
    (["--llm", "m", "--llm-price", "prices.json"], "no such file"),
    (["--llm", "m", "--llm-price", "BADFILE"], "does not parse"),
    (["--llm", "m", "--llm-max-cost", "0"], "positive"),
    (["--llm", "m", "--llm-max-requests", "0"], "at least 1"),
    (["--llm-max-cost", "1"], "no LLM is set: set --llm SPEC"),
    (["--proposer", "builtin", "--llm", "m", "--llm-max-requests", "3"], "--proposer leaves it out"),
    (["--llm", "m", "--llm-agents", "explorer,critic"], "unknown critic; known: explorer, refiner, supervisor"),
    (["--llm", "m", "--llm-agents", ","], "names no agent"),
])
def test_bad_proposer_flags_are_usage_errors(write, capsys, captured, tmp_path, argv, words):
    """Exit 2 with one line, before any work: the API is never called."""
    (tmp_path / "d").mkdir()
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "bad.json").write_text("{not json")
    subst = {"MISSING": str(tmp_path / "missing.md"), "DIR": str(tmp_path / "d"), "EMPTY": str(tmp_path / "empty.md"),
             "BADFILE": str(tmp_path / "bad.json")}
    rc, out, _ = run(capsys, "optimize", write("ref.py", REF), *[subst.get(a, a) for a in argv], "--json")
    doc = json.loads(out)
    assert rc == 2 and doc["status"] == "error" and doc["reason"] == "usage", doc
    assert words in doc["message"] and "\n" not in doc["message"]
    assert captured == []


def test_bad_flags_without_json_are_one_line_on_stderr(write, capsys, captured):
    rc, out, err = run(capsys, "optimize", write("ref.py", REF), "--proposer", "llm")
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: --proposer llm needs a model")


@pytest.mark.slow
def test_a_run_with_proposer_builtin_is_the_library_run(write, capsys, tmp_path, proj):
    out = tmp_path / "out"
    rc, o, _ = run(capsys, "optimize", write("proj.py", proj), "--proposer", "builtin", "--budget", "120",
                   "--max-candidates", "1", "--out", str(out), "--json")
    doc = json.loads(o)
    assert rc == 0 and doc["candidates"] == 1
    result = json.loads((out / "result.json").read_text())
    assert [e["candidate"]["proposer"] for e in result["evaluations"]] == ["library"]
    assert (out / "optimized.py").exists()
