"""optimize on the CPU with the LLM proposer against a scripted OpenAI-compatible server: one reply is a correct
candidate, one a wrong one; the same gate as every strategy rejects the wrong one and times the correct one;
result.json has the LLM's summary, each candidate its usage, the run its hints."""
from __future__ import annotations

import json

import pytest

from kernelgate import api
from kernelgate.config import TimingConfig
from kernelgate.search import SearchConfig
from kernelgate.store import Store
from llm_fakes import CORRECT, FAKE_OPENAI_KEY, REFERENCE, WRONG

FAST = SearchConfig(per_generation=2, timing=TimingConfig(warmup_ms=20, rounds=2, iters=5), confirm_tries=1)
HINT = "the ReLU and the add can share one pass"


@pytest.mark.slow
def test_optimize_with_the_llm_proposer_through_the_gate(openai_server, tmp_path):
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    s = openai_server
    s.add(("reply", CORRECT, (1000, 200)), ("reply", WRONG, (900, 100)))
    ref = tmp_path / "ref.py"
    ref.write_text(REFERENCE)
    store = str(tmp_path / "store.sqlite")
    lines: list[str] = []
    llm = {"llm": f"openai:coder@{s.url}/v1", "prices": "coder=1/2", "backoff": 0.001, "timeout": 30.0}
    res = api.optimize(str(ref), target="cpu", budget=300, max_candidates=2, out=str(tmp_path / "out"), store=store,
                       progress=lines.append, search_config=FAST, proposers=("llm",), llm=llm, hints=[HINT])
    # both agents asked in generation 0, each reply one candidate, both through the gate
    assert [e.candidate.proposer for e in res.evaluations] == ["llm", "llm"]
    by_code = {("clamp_min" in e.candidate.source): e for e in res.evaluations}
    good, bad = by_code[True], by_code[False]
    assert good.accepted and good.timing is not None and good.speedup is not None, good.verdict.message
    assert not bad.accepted and bad.verdict.reason.value == "mismatch" and bad.timing is None
    assert all(e.candidate.generation == 0 and e.candidate.stack == () for e in res.evaluations)
    assert any(line.startswith("llm: openai:coder@") for line in lines)            # the endpoint was checked first
    assert res.llm is not None and res.to_json()["llm"] == res.llm and res.hints == (HINT,)   # what the CLI prints

    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    summ = doc["llm"]
    assert summ["outcomes"] == {"candidate": 2} and summ["totals"]["requests"] == 2
    assert summ["totals"]["input_tokens"] == 1900 and summ["totals"]["cost_usd"] == pytest.approx(1900e-6 + 2 * 300e-6)
    assert summ["hints"] == [HINT] and doc["hints"] == [HINT] and doc["proposers"] == ["llm"]
    assert {a["candidate"] for a in summ["attempts"]} == {e.candidate.id for e in res.evaluations}
    for e in doc["evaluations"]:                                                # usage stays on each candidate
        assert e["candidate"]["usage"]["model"] == "coder" and e["candidate"]["usage"]["requests"] == 1
    assert any(n.startswith("llm: 2 requests") for n in doc["notes"])
    assert api.NO_LLM not in doc["notes"]
    # every request carried the hint; no key in anything written
    assert all(HINT in r["body"]["messages"][0]["content"] for r in s.requests if r["body"])
    out_text = "".join(p.read_text() for p in (tmp_path / "out").glob("*.json"))
    assert FAKE_OPENAI_KEY not in out_text
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["hints"] == [HINT] and run["proposers"] == ["llm"]
    row = Store(store).recent(1)[0]
    assert row.kind == "optimize" and Store(store).payload(row.id)["hints"] == [HINT]
