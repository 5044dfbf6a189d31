"""The review queue: what the gate flags and what agents propose waits for a person; `kernelgate review` lists,
shows, accepts and rejects (time, who, note); a suite's aggregates count a flagged result only once accepted."""
import json
import math

import pytest

from kernelgate import review
from kernelgate.cli import main
from kernelgate.errors import KernelgateError
from kernelgate.store import Store
from kernelgate.suite.aggregate import counted_speedup, summarize


def timing(label, median, inproc):
    return {"label": label, "samples_ms": [median] * 10, "wall_ms_per_iter": median + 0.05, "median_ms": median,
            "spread": 0.01, "kind": "candidate", "harness_ms": 0.05, "inproc_ms": inproc}


def speedup(ratio, claimed=True):
    return {"ratio": ratio, "low": ratio * 0.95, "high": ratio * 1.05, "threshold": 1.03, "claimed": claimed,
            "flagged": ratio > 3.0}


def test_what_the_gate_flags():
    base = timing("eager", 2.0, 1.8)
    assert review.result_flags(speedup(1.5), timing("c", 1.33, 1.2), 0.2, base) == []
    assert review.result_flags(speedup(4.0), timing("c", 0.5, 0.45), 0.2, base)[0].startswith(
        "speedup 4.00x over the faster baseline is above 3x")
    # the two clocks disagree about the candidate (not about the baseline): the judge's figure is suspect
    f = review.result_flags(speedup(1.5), timing("c", 1.33, 0.3), None, base)
    assert len(f) == 1 and f[0].startswith("timer disagreement") and "4.43 for the candidate" in f[0]
    # a disagreement both rows share (the harness, a busy machine) is not the candidate's
    assert review.result_flags(speedup(1.5), timing("c", 1.33, 0.3), None, timing("eager", 2.0, 0.45)) == []
    assert review.result_flags(speedup(1.5), timing("c", 1.33, 1.2), 0.85, base) == [
        "near the roofline floor: 85% of the floor's rate"]
    assert review.result_flags(speedup(1.5), timing("c", 1.33, 1.2), 1.25, base)[0].startswith(
        "below the roofline floor: the median is 0.80x the floor's time")
    # unclaimed: only the gate's own 3x flag, nothing about clocks or the floor
    assert review.result_flags(speedup(1.5, claimed=False), timing("c", 1.33, 0.3), 0.95, base) == []


def bench_doc(ratio, cand_inproc=None):
    sp = speedup(ratio)
    v = {"status": "accepted", "reason": "ok", "message": "all checks passed", "checks": [], "notes": [],
         "assumptions": [], "workload_hash": "wh", "candidate_hash": "ch", "target": "cpu", "device": "cpu",
         "seconds": 1.0}
    return {"workload": "/w/ref.py", "target": "cpu", "device": "cpu", "baseline": "eager",
            "rows": [{"label": "eager", "timing": timing("eager", 2.0, 1.8), "verdict": None, "speedup": None,
                      "note": "faster baseline", "floor_fraction": 0.1},
                     {"label": "fast", "timing": timing("fast", 2.0 / ratio, cand_inproc or 1.8 / ratio), "verdict": v,
                      "speedup": sp, "note": "", "floor_fraction": 0.3}],
            "conditions": {"floor": {"seconds": 1e-4, "bound": "memory", "machine": "cpu"}}, "status": "accepted"}


def test_a_flagged_bench_result_is_queued_once_with_its_evidence(tmp_path):
    st = Store(tmp_path / "s.sqlite")
    assert review.queue_bench(st, bench_doc(1.5)) == {}
    items = review.queue_bench(st, bench_doc(4.4))
    item = items["fast"]
    assert item["status"] == "pending" and item["kind"] == "result" and item["source"] == "mcp"
    assert item["evidence"]["speedup"] == 4.4 and item["evidence"]["baseline_ms"] == 2.0
    assert item["evidence"]["inproc_ms"] == pytest.approx(1.8 / 4.4) and item["workload_hash"] == "wh"
    assert len(item["flags"]) == 1 and item["flags"][0].startswith("speedup 4.40x")
    assert "fast on cpu: 4.40x over eager (ref.py)" == item["subject"]
    again = review.queue_bench(st, bench_doc(4.4))["fast"]                     # the same candidate: one item
    assert again["id"] == item["id"] and len(st.reviews()) == 1
    clocks = review.queue_bench(Store(tmp_path / "t.sqlite"), bench_doc(1.5, cand_inproc=0.3))["fast"]
    assert [f.split(":")[0] for f in clocks["flags"]] == ["timer disagreement"]


def test_a_flagged_submission_is_queued_under_its_run():
    st = Store()
    doc = {"status": "accepted", "run_id": "r1", "out": "/o", "workload": "/w/ref.py",
           "candidate": {"id": "c1", "strategy": "human:fast", "proposer": "human"}, "file": "fast.py",
           "verdict": {"workload_hash": "wh"}, "timing": timing("c1", 0.5, 0.45),
           "baseline": timing("eager", 2.0, 1.8), "speedup": speedup(4.0)}
    item = review.queue_submission(st, doc, floor_fraction=0.9)
    assert st.review(f"run:r1:c1")["id"] == item["id"]
    assert len(item["flags"]) == 2 and item["flags"][1].startswith("near the roofline floor: 90%")
    assert review.queue_submission(st, {**doc, "speedup": speedup(1.5)}, 0.2) is None
    assert review.queue_submission(st, {**doc, "status": "rejected"}) is None


def test_a_flagged_optimize_result_is_queued_under_its_workload(tmp_path):
    """optimize's kept result (the CLI queues it after the run) waits for a person when flagged."""
    from types import SimpleNamespace as NS
    st = Store(tmp_path / "s.sqlite")
    js = lambda d: NS(to_json=lambda: d)  # noqa: E731 - records' to_json documents
    best = NS(timing=js(timing("c1", 0.5, 0.45)), baseline=js(timing("compile", 2.0, 1.8)),
              candidate=NS(id="c1", strategy="runtime:cudagraph", proposer="library"),
              verdict=NS(workload_hash="wh"))
    res = NS(best=best, final=js(speedup(4.0)), workload="/w/gru.py", target="cuda")
    item = review.queue_optimize(st, res, "out")
    assert item["status"] == "pending" and item["source"] == "cli" and item["flags"][0].startswith("speedup 4.00x")
    assert item["evidence"]["candidate_file"] == "out/candidates/c1.py" and "gru.py" in item["subject"]
    assert review.queue_optimize(st, NS(**{**vars(res), "final": js(speedup(1.4))}), "out") is None
    assert review.queue_optimize(st, NS(**{**vars(res), "best": None}), "out") is None


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_review_command_lists_shows_and_records_decisions(capsys):
    st = Store()
    rc, out, _ = run(capsys, "review")
    assert rc == 0 and out.strip() == "nothing awaits review"
    a = review.queue_bench(st, bench_doc(5.0))["fast"]
    b = review.propose_assumption(st, "/w/ref.py", "wh", {"domain": {"0": [-1, 1]}}, "inputs are normalized")
    rc, out, _ = run(capsys, "review")
    assert rc == 0 and out.startswith("2 items pending")
    assert f"#{a['id']}" in out and "speedup 5.00x" in out and "baseline_ms 2" in out
    assert f"#{b['id']}" in out and "input 0 in [-1, 1]" in out and "proposed: inputs are normalized" in out
    rc, out, _ = run(capsys, "review", "--json")
    assert rc == 0 and [i["id"] for i in json.loads(out)] == [a["id"], b["id"]]
    # a decision needs a note; then it is recorded once, with the time, who and the note
    rc, out, err = run(capsys, "review", "accept", str(a["id"]))
    assert rc == 2 and "--note is required" in err
    rc, out, _ = run(capsys, "review", "accept", str(a["id"]), "--note", "checked: fused kernel, one pass", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["status"] == "accepted" and doc["note"] == "checked: fused kernel, one pass"
    assert doc["decided"] > 0 and doc["decided_by"]
    rc, out, err = run(capsys, "review", "reject", str(a["id"]), "--note", "changed my mind")
    assert rc == 2 and "was accepted" in err and "recorded once" in err
    rc, out, _ = run(capsys, "review", "reject", str(b["id"]), "--note", "the generator is not normalized")
    assert rc == 0 and "decided   rejected" in out
    rc, out, _ = run(capsys, "review")
    assert rc == 0 and out.strip() == "nothing awaits review"
    rc, out, _ = run(capsys, "review", "--all")
    assert rc == 0 and out.startswith("2 items;") and "decided   accepted" in out
    rc, out, _ = run(capsys, "review", "show", str(b["id"]), "--json")
    assert rc == 0 and json.loads(out)["status"] == "rejected"
    for argv in (("review", "show", "999"), ("review", "accept", "999", "--note", "x"), ("review", "accept"),
                 ("review", "list", "3"), ("review", "frobnicate")):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, argv
    rc, out, _ = run(capsys, "review", "show", "999", "--json")
    assert rc == 2 and json.loads(out)["status"] == "error"
    with pytest.raises(KernelgateError, match="accepted or rejected|no review item"):
        review.decide(st, 999, "accepted", "x")


def suite_row(pid, speedup, flagged=False, claimed=True, report=None):
    return {"id": pid, "level": "level1", "name": pid.split("/")[-1], "outcome": "ok", "speedup": speedup,
            "claimed": claimed, "flagged": flagged, "ci": [speedup * 0.9, speedup * 1.1], "best_strategy": "s",
            "baseline_kind": "compile", "baseline_ms": 1.0, "best_ms": 1.0 / speedup, "attempts": [{"rc": 0}],
            "source": f"/problems/{pid}.py", "report": report}


def test_a_suite_counts_a_flagged_result_only_once_a_person_accepts_it(tmp_path):
    out = tmp_path / "results"
    (out / "level1" / "big").mkdir(parents=True)
    (out / "level1" / "big" / "result.json").write_text(json.dumps(
        {"run_id": "run42", "best_id": "cand7", "workload_hash": "wh", "confirmations": [{}],
         "evaluations": [{"candidate": {"id": "cand7"}, "timing": timing("cand7", 0.2, 0.19),
                          "baseline": timing("compile", 1.0, 0.95)}]}))
    rows = [suite_row("level1/a", 2.0), suite_row("level1/big", 5.0, flagged=True, report="level1/big/report.html")]
    suite = {"dir": "problems", "target": "cpu", "out": str(out)}
    st = Store(tmp_path / "s.sqlite")
    doc = summarize(rows, suite, st)
    (item,) = st.reviews("pending")
    assert item["key"] == "run:run42:cand7" and item["source"] == "suite" and item["evidence"]["speedup"] == 5.0
    assert item["evidence"]["report"] == str(out / "level1" / "big" / "report.html")
    assert doc["geomean_speedup"] == pytest.approx(math.sqrt(2.0 * 1.0))      # pending: counts 1.0
    assert doc["claimed"] == ["level1/a"] and doc["flagged"][0]["id"] == "level1/big"
    assert doc["flagged"][0]["review"] == f"pending (kernelgate review, item {item['id']})"
    assert doc["geomean_speedup_with_flagged"] == pytest.approx(math.sqrt(10.0))
    assert counted_speedup(rows[1]) == 1.0 and "review" not in rows[1]       # the caller's rows are left alone
    # summarizing again queues nothing new; accepted, the result counts its speedup (still listed as flagged)
    summarize(rows, suite, st)
    assert len(st.reviews()) == 1
    review.decide(st, item["id"], "accepted", "profiled it: one fused kernel at 60% of the bandwidth")
    doc = summarize(rows, suite, st)
    assert doc["geomean_speedup"] == pytest.approx(math.sqrt(10.0))
    assert doc["claimed"] == ["level1/a", "level1/big"] and doc["flagged"][0]["review"].startswith("accepted")
    assert doc["rows"][1]["review"]["status"] == "accepted" and doc["fast_p"]["2"] == pytest.approx(0.5)


def test_a_rejected_flagged_result_counts_one_and_the_default_store_is_used(tmp_path):
    rows = [suite_row("level1/a", 2.0), suite_row("level1/big", 5.0, flagged=True)]
    doc = summarize(rows, {"dir": "problems", "target": "cpu"})              # the default store ($KERNELGATE_STORE)
    st = Store()
    (item,) = st.reviews("pending")
    assert item["key"].startswith("suite:problems:level1/big")                 # no result.json: keyed by the row
    review.decide(st, item["id"], "rejected", "the candidate skips the bias on odd sizes")
    doc = summarize(rows, {"dir": "problems", "target": "cpu"})
    assert doc["geomean_speedup"] == pytest.approx(math.sqrt(2.0)) and doc["claimed"] == ["level1/a"]
    assert doc["flagged"][0]["review"].startswith("rejected")
    # an unflagged suite never opens the store
    assert summarize([suite_row("level1/a", 2.0)], {"store": str(tmp_path / "nodir" / "x" / "..")})["counted"] == 1
