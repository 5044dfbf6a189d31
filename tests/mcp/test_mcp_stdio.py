"""The MCP server end to end, with the real MCP client over stdio: a scripted agent fixes a rejected candidate
and gets it accepted and timed in an optimize run's population; an exploit is rejected with its reason."""
import json
import shutil
import tomllib

import pytest

pytest.importorskip("mcp")

from conftest import CORPUS, RIGHT, WRONG, stdio_session  # noqa: E402

from kernelgate.store import Store  # noqa: E402
from kernelgate.workload import file_hash  # noqa: E402


def make_run(tmp_path, ref):
    """An optimize run's --out folder before any candidate: run.json and the run's copy of the workload."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(ref, out / "reference.py")
    (out / "run.json").write_text(json.dumps({"run_id": "0123456789ab", "seed": 0, "workload_hash": file_hash(str(ref)),
                                              "target": "cpu"}))
    return out


@pytest.mark.slow
def test_a_scripted_agent_reads_the_reason_fixes_its_candidate_and_gets_it_accepted_and_timed(tmp_path, ref_file):
    out = make_run(tmp_path, ref_file)

    async def agent(call):
        seen = {}
        err, w = await call("load_workload", ref="ref.py")
        assert not err and w["inputs"] == "float32[64, 128]" and w["admission"]["ok"], w
        assert w["floor"]["seconds"] > 0 and "floor" in w["summary"]
        # a wrong candidate: rejected, and the first line says which check failed and what to do
        err, first = await call("submit", run_dir="out", candidate_source=WRONG, name="scaled_relu")
        assert not err, first
        seen["first"] = first
        summary = first["summary"]
        assert summary.startswith(("REJECTED (mismatch): trial", "REJECTED (mismatch): first call")), summary
        assert "max err" in summary and "->" in summary
        assert first["verdict"]["checks"][0]["ok"] is False            # the failing check first
        # the agent reads the reason (a mismatch) and fixes the math; the fixed file goes in as source text again
        assert first["verdict"]["reason"] == "mismatch"
        err, second = await call("submit", run_dir="out", candidate_source=RIGHT, name="scaled_relu",
                                 rounds=2, iters=5)
        assert not err, second
        seen["second"] = second
        err, hist = await call("run_history", run="out")
        assert not err, hist
        seen["history"] = hist
        err, hint = await call("add_hint", run="out", text="fold the scale into the GEMM's epilogue")
        assert not err and hint["hints"] == 1, hint
        return seen

    seen = stdio_session(agent, tmp_path)
    second = seen["second"]
    assert second["summary"].startswith("ACCEPTED (ok)"), second["summary"]
    assert second["status"] == "accepted" and second["run_id"] == "0123456789ab"
    assert second["timing"]["median_ms"] > 0 and second["baseline"]["label"] in ("eager", "compile")
    sp = second["speedup"]
    t = second["timing"]                 # with the harness included where the clock cannot resolve the call
    cand_ms = t["median_ms"] + (t["harness_ms"] if sp["bounded"] else 0.0)
    assert sp["ratio"] == pytest.approx(second["baseline"]["median_ms"] / cand_ms)
    assert isinstance(sp["claimed"], bool) and " ms vs " in second["summary"]
    assert second["candidate"]["strategy"] == "human:scaled_relu"
    # both are in the run's population (the store), in order, the rejected one with its reason
    hist = seen["history"]
    assert [e["status"] for e in hist["evaluations"]] == ["rejected", "accepted"], hist
    assert hist["evaluations"][0]["why"].startswith("REJECTED (mismatch)")
    assert hist["evaluations"][1]["median_ms"] == pytest.approx(second["timing"]["median_ms"])
    evs = Store().evaluations("0123456789ab")
    assert [e["verdict"]["status"] for e in evs] == ["rejected", "accepted"]
    assert Store().hints("0123456789ab") == ["fold the scale into the GEMM's epilogue"]
    assert len(list((out / "candidates").glob("*.py"))) == 2          # the judged files, as for every candidate


def _case(name):
    cases = tomllib.loads((CORPUS / "manifest.toml").read_text())["case"]
    return next(c for c in cases if c["name"] == name)


@pytest.mark.slow
def test_an_exploit_submitted_over_mcp_is_rejected_and_an_honest_one_is_timed(tmp_path):
    case = _case("cache_shape")                       # outputs cached by input shape: stale on new inputs
    ref = tmp_path / "softmax_rows.py"
    shutil.copy(CORPUS / case["ref"], ref)
    exploit = (CORPUS / case["cand"]).read_text()
    honest = (CORPUS / "honest" / "softmax_logsumexp.py").read_text()

    async def agent(call):
        err, bad = await call("verify", ref="softmax_rows.py", candidate_source=exploit)
        assert not err, bad
        err, timed = await call("bench", ref="softmax_rows.py", candidate_sources=[honest], names=["logsumexp"],
                                rounds=2, iters=5, baselines="eager")
        assert not err, timed
        err, missing = await call("verify", ref="softmax_rows.py")             # no candidate: a usage error
        return bad, timed, missing

    bad, timed, missing = stdio_session(agent, tmp_path)
    assert bad["status"] == case["expect"] == "rejected"
    assert bad["reason"] in [case["reason"], *case.get("also", [])], bad
    assert bad["summary"].startswith(f"REJECTED ({bad['reason']})")
    row = next(r for r in timed["rows"] if r["label"] == "logsumexp")
    assert row["verdict"]["status"] == "accepted" and row["timing"]["median_ms"] > 0 and row["speedup"]["ratio"] > 0
    assert timed["baseline"] == "eager" and timed["summary"].startswith("logsumexp: ")
    assert len(json.dumps(timed)) < 8000                                        # short enough for a context
    assert missing == {"status": "error", "reason": "usage", "message": missing["message"],
                       "advice": "fix the call's arguments"}
    assert "candidate_path or as candidate_source" in missing["message"]
