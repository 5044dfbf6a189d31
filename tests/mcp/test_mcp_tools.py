"""The server's parts without the SDK: replies trimmed for a context, limits (a cap on evaluations at once, time
limits that stop a job and everything below it), private files for source text, runs, hints, assumptions."""
import json
import os
import stat
import time

import pytest

anyio = pytest.importorskip("anyio")

from conftest import CORPUS  # noqa: E402

from kernelgate import review  # noqa: E402
from kernelgate.errors import KernelgateError  # noqa: E402
from kernelgate.mcp import replies, runner  # noqa: E402
from kernelgate.mcp.server import Tools  # noqa: E402
from kernelgate.store import Store  # noqa: E402

CHECKS = [{"name": "task admission", "ok": True, "detail": "4 trivial mutants rejected"},
          {"name": "build", "ok": True, "detail": "ModelNew constructed"}] + \
         [{"name": f"trial {i}", "ok": True, "detail": f"max err 1e-7 (allowed 1e-6)\nsecond line {i}"}
          for i in range(1, 12)] + \
         [{"name": "trial 12 (wide)", "ok": False, "detail": "max error too large: max err 2.07 (allowed 5e-06)\nmore"}]
REJECTED = {"status": "rejected", "reason": "mismatch", "message": "trial 12 (wide): max error too large",
            "checks": CHECKS, "notes": [f"note {i}" for i in range(9)],
            "assumptions": ["precision: the reference's own"],
            "workload_hash": "w", "candidate_hash": "c", "target": "cpu", "device": "cpu", "seconds": 1.0}


def test_a_rejection_reads_as_one_actionable_line_first():
    r = replies.verify_reply(REJECTED)
    assert list(r)[0] == "summary"
    assert r["summary"].startswith("REJECTED (mismatch): trial 12 (wide): max error too large: max err 2.07")
    assert "explain_tolerance" in r["summary"] and "\n" not in r["summary"]
    assert r["checks"][0]["name"] == "trial 12 (wide)" and len(r["checks"]) == 4 and r["checks_omitted"] == 10
    assert all("\n" not in c["detail"] for c in r["checks"])
    assert len(r["notes"]) == replies.NOTES and r["notes_omitted"] == 4
    # the record's fields stay (Verdict.to_json's keys)
    assert set(REJECTED) <= set(r) and r["reason"] == "mismatch" and r["candidate_hash"] == "c"
    ok = replies.verify_reply({**REJECTED, "status": "accepted", "reason": "ok", "message": "all checks passed",
                               "checks": CHECKS[:-1]})
    assert ok["summary"] == "ACCEPTED (ok): all checks passed" and len(ok["checks"]) == replies.CHECKS


def test_a_bench_reply_keeps_the_figures_and_cuts_the_samples():
    t = lambda label, med, inproc: {"label": label, "samples_ms": [med] * 50, "wall_ms_per_iter": med + 0.1,  # noqa
                                    "median_ms": med, "spread": 0.01, "kind": "candidate", "harness_ms": 0.1,
                                    "inproc_ms": inproc}
    sp = {"ratio": 4.0, "low": 3.8, "high": 4.2, "threshold": 1.03, "claimed": True, "flagged": True}
    doc = {"workload": "/w/ref.py", "target": "cpu", "device": "cpu", "baseline": "eager",
           "rows": [{"label": "eager", "floor_fraction": 0.1, "timing": t("eager", 4.0, 3.9), "verdict": None,
                     "speedup": None, "note": "faster baseline"},
                    {"label": "fast", "floor_fraction": 0.4, "timing": t("fast", 1.0, 0.95),
                     "verdict": {**REJECTED, "status": "accepted", "reason": "ok", "checks": CHECKS[:-1]},
                     "speedup": sp, "note": ""}],
           "conditions": {"device": "cpu", "torch": "2", "command": "x" * 5000}, "status": "accepted", "message": ""}
    r = replies.bench_reply(doc, {"fast": {"id": 7, "status": "pending"}})
    assert r["summary"].startswith("fast: 1 ms, 4.000x over eager (95% CI [3.800, 4.200]), claimed; flagged")
    fast = r["rows"][1]
    assert fast["timing"]["median_ms"] == 1.0 and len(fast["timing"]["samples_ms"]) == replies.SAMPLES
    assert fast["timing"]["samples_n"] == 50 and fast["speedup"] == sp and fast["review"]["id"] == 7
    assert fast["verdict"]["checks"] == [] and "assumptions" not in fast["verdict"]
    assert "command" not in r["conditions"] and len(json.dumps(r)) < replies.MAX_CHARS


def test_fit_drops_bulk_never_the_summary():
    doc = {"summary": "s", "status": "ok", "notes": ["n" * 500] * 40, "evaluations": [{"x": "y" * 300}] * 60}
    r = replies.fit(doc)
    assert r["summary"] == "s" and r["status"] == "ok" and len(json.dumps(r)) <= replies.MAX_CHARS
    assert r["evaluations_truncated"] and r["evaluations"][-1] == doc["evaluations"][-1]


def test_source_text_goes_to_a_private_file_removed_after_the_call():
    with runner.workspace() as d:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        taken = set()
        a = runner.write_source(d, "print(1)", "my kernel!", taken)
        b = runner.write_source(d, "print(2)", "my kernel!", taken)
        c = runner.write_source(d, "x", "9lives")
        assert a.endswith("/my_kernel.py") and b.endswith("/my_kernel_2.py") and c.endswith("/c_9lives.py")
        assert stat.S_IMODE(os.stat(a).st_mode) == 0o600 and open(b).read() == "print(2)"
    assert not d.exists()


def test_at_most_n_evaluations_at_once_and_a_call_waits_within_its_limit(monkeypatch, tmp_path):
    jobs = runner.Jobs(runner.Limits(concurrent=2, timeout_s=30))
    live, peak = [0], [0]

    async def fake(kind, args, workdir, limit):
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        await anyio.sleep(0.2)
        live[0] -= 1
        return {"ok": True, "doc": {"kind": kind, "limit": limit}}
    monkeypatch.setattr(jobs, "_spawn", fake)

    async def many():
        out = []
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                async def one():
                    out.append(await jobs.run("verify", {}, tmp_path))
                tg.start_soon(one)
        return out
    t0 = time.monotonic()
    out = anyio.run(many)
    assert peak[0] == 2 and len(out) == 5 and all(r["ok"] for r in out)
    assert time.monotonic() - t0 >= 0.55                     # three waves of two
    # a call that cannot get a slot within its time limit is told so, and nothing runs for it
    jobs1 = runner.Jobs(runner.Limits(concurrent=1, timeout_s=30))
    monkeypatch.setattr(jobs1, "_spawn", fake)

    async def crowded():
        res = {}
        async with anyio.create_task_group() as tg:
            async def slow():
                res["slow"] = await jobs1.run("verify", {}, tmp_path, timeout=5)

            async def hurried():
                await anyio.sleep(0.05)
                res["hurried"] = await jobs1.run("verify", {}, tmp_path, timeout=0.1)
            tg.start_soon(slow)
            tg.start_soon(hurried)
        return res
    res = anyio.run(crowded)
    assert res["slow"]["ok"] and res["hurried"] == {"ok": False, "status": "error", "reason": "busy",
                                                    "message": res["hurried"]["message"]}
    # each call's limit: the kind's default, a smaller one asked for, never more than the server's
    assert jobs1.timeout_for("bench", None) == 30 and jobs1.timeout_for("verify", 12) == 12
    assert jobs1.timeout_for("verify", 1e9) == 30


@pytest.mark.slow
def test_a_call_past_its_time_limit_is_stopped_with_its_workers(tmp_path):
    """An endless forward: the gate's own call timeout (120 s) is far away; the call's limit stops the job,
    its judge closes the worker, and nothing of it is left running."""
    tools = Tools(str(tmp_path / "store.sqlite"), runner.Limits(concurrent=1, timeout_s=600))
    ref = CORPUS / "refs" / "softmax_rows.py"
    before = runner.descendants(os.getpid())     # what earlier tests left running (a Ray instance) is not the call's
    t0 = time.monotonic()
    with pytest.raises(KernelgateError) as e:
        anyio.run(lambda: tools.verify(str(ref), candidate_path=str(CORPUS / "exploits" / "infinite_loop_forward.py"),
                                       timeout_s=25))
    took = time.monotonic() - t0
    assert e.value.code == "timeout" and "time limit (25 s)" in str(e.value)
    assert took < 25 + runner.GRACE_S + 10
    assert runner.descendants(os.getpid()) - before == set()      # the job, its judge and its worker are gone


def test_runs_hints_and_assumptions_through_the_store(tmp_path):
    st = str(tmp_path / "store.sqlite")
    tools = Tools(st)
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"run_id": "abcdef123456", "workload_hash": "h", "target": "cpu"}))
    ref = tmp_path / "ref.py"
    ref.write_text("# a workload\n")
    r = anyio.run(lambda: tools.add_hint(str(out), "  use one GEMM  "))
    assert r["run_id"] == "abcdef123456" and r["hints"] == 1
    anyio.run(lambda: tools.add_hint(str(out), "keep fp32"))
    assert Store(st).hints("abcdef123456") == ["use one GEMM", "keep fp32"]
    for bad in (lambda: tools.add_hint(str(out), " "), lambda: tools.add_hint("no-such-run", "x"),
                lambda: tools.run_history("abcdef123456")):          # an id the store has no evaluation of
        with pytest.raises(KernelgateError):
            anyio.run(bad)
    h = anyio.run(lambda: tools.run_history(str(out)))
    assert h["evaluations"] == [] and h["best"] is None and h["hints"] == ["use one GEMM", "keep fp32"]
    # an assumption: proposed, unusable until a person accepts it, then usable for this workload only
    p = anyio.run(lambda: tools.propose_assumption(str(ref), {"precision": ["bf16"]}, "the model is trained in bf16"))
    item = p["review"]["id"]
    assert p["review"]["status"] == "pending" and "bf16" in p["summary"]
    with pytest.raises(KernelgateError, match="is pending"):
        tools.contract(str(ref), item)
    with pytest.raises(KernelgateError, match="does not parse"):
        anyio.run(lambda: tools.propose_assumption(str(ref), {"precision": ["fp4"]}, "why not"))
    review.decide(Store(st), item, "accepted", "trained in bf16, checked the recipe")
    assert tools.contract(str(ref), item) == {"precision": ["bf16"]}
    assert anyio.run(lambda: tools.review_status(item))["review"]["status"] == "accepted"
    other = tmp_path / "other.py"
    other.write_text("# another workload\n")
    with pytest.raises(KernelgateError, match="another workload"):
        tools.contract(str(other), item)
    with pytest.raises(KernelgateError, match="no such file"):
        anyio.run(lambda: tools.verify("missing.py", candidate_source="x"))
    with pytest.raises(KernelgateError, match="one of them"):
        anyio.run(lambda: tools.verify(str(ref), candidate_path=str(ref), candidate_source="x"))


def test_tolerance_and_workload_replies_lead_with_the_figures():
    text = ("output format fp32, unit roundoff u = 2^-24\nrule: factor 2\n"
            "  max|C-G|      <= 2 * 2.3e-06 + 8 * u * 4.3 = 6.71e-06\n  mean|C-G|     <= 3.5e-07")
    r = replies.explain_reply({"text": [text], "outputs": [{"output_format": "fp32"}]})
    assert r["summary"] == "max|C-G| <= 2 * 2.3e-06 + 8 * u * 4.3 = 6.71e-06" and r["explanation"] == [text]
    kept = {"kept": True, "measured": 1.0, "faster": "eager",
            "timings": {"eager": {"median_ms": 1.0, "samples_ms": [1.0] * 30}, "compile": {"median_ms": 2.0}}}
    w = replies.workload_reply({"class": "Model", "workload": "/w/ref.py", "inputs": "float32[8, 8]",
                                "outputs": "float32[8, 8]", "parameters": 72, "device": "cpu",
                                "floor": {"seconds": 2e-6, "bound": "memory", "machine": "cpu", "derivation": "d"},
                                "baselines": kept})
    assert w["summary"] == ("Model in /w/ref.py: inputs float32[8, 8]; outputs float32[8, 8]; 72 parameters on cpu; "
                            "floor 0.002 ms (memory-bound on cpu); baselines eager 1 ms, compile 2 ms (faster: eager, "
                            "kept)")
    assert len(w["baselines"]["timings"]["eager"]["samples_ms"]) == replies.SAMPLES
    none = replies.workload_reply({"class": "Model", "baselines": None})
    assert none["baselines"] is None and "baselines=true" in none["baselines_note"]


def test_without_the_sdk_the_command_is_a_usage_error(monkeypatch, capsys):
    import sys
    from kernelgate.cli import main
    for name in ("mcp", "mcp.server", "mcp.server.mcpserver", "mcp.server.fastmcp"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["mcp"]) == 2
    assert "pip install 'kernelgate[mcp]'" in capsys.readouterr().err
