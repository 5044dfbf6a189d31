"""The suite's aggregates: geometric mean with kept baselines, failures and flagged results at 1.0, degenerate
tasks left out; fast_p; the CSV and the HTML page."""
import csv
import io
import json
import math

import pytest

from kernelgate.suite import aggregate
from kernelgate.suite.aggregate import counted_speedup, fast_p, geomean, summarize


def row(pid, outcome="ok", speedup=1.0, claimed=None, flagged=False, **kw):
    claimed = (speedup or 0) > 1.02 if claimed is None else claimed
    return {"id": pid, "level": "level1", "name": pid, "outcome": outcome, "speedup": speedup, "claimed": claimed,
            "flagged": flagged, "ci": [speedup * 0.9, speedup * 1.1] if speedup else None, "attempts": [{"rc": 0}], **kw}


ROWS = [
    row("a", speedup=2.0),                                     # claimed 2x
    row("b", speedup=1.5),                                     # claimed 1.5x
    row("c", speedup=1.0, claimed=False),                      # baseline kept
    row("d", speedup=1.3, claimed=False),                      # measured faster, not claimable: counts 1.0
    row("e", outcome="failed", speedup=None, reason="timeout", message="stopped"),
    row("f", speedup=5.0, flagged=True),                       # flagged for review: counts 1.0
    row("g", outcome="degenerate", speedup=None, reason="degenerate", message="zeros passes"),
    {"id": "h", "level": "level2", "name": "h", "outcome": "pending"},
]


def test_counted_speedup():
    assert [counted_speedup(r) for r in ROWS] == [2.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert counted_speedup(row("x", speedup=float("inf"))) == 1.0


def test_geomean_counts_failures_kept_and_flagged_as_one_and_leaves_degenerate_out():
    doc = summarize(ROWS, {"dir": "d", "target": "cpu", "budget_per_s": 8})
    # counted: a b c d e f (6); degenerate and pending are not
    assert doc["counted"] == 6 and doc["problems"] == 8 and doc["finished"] == 7
    assert doc["geomean_speedup"] == pytest.approx(math.exp((math.log(2.0) + math.log(1.5)) / 6))
    assert doc["geomean_speedup_with_flagged"] == pytest.approx((2.0 * 1.5 * 5.0) ** (1 / 6))
    assert doc["claimed"] == ["a", "b"] and doc["kept_baseline"] == ["c", "d"]
    assert doc["failures"] == [{"id": "e", "reason": "timeout", "message": "stopped"}]
    assert [f["id"] for f in doc["flagged"]] == ["f"]
    assert [d["id"] for d in doc["degenerate"]] == ["g"] and doc["pending"] == ["h"]
    assert geomean([]) is None


def test_fast_p():
    doc = summarize(ROWS, {})
    # denominator 6 (a-f); finished with a result: a b c d f (5); > 1: a b; > 1.2: a b; > 1.5: a; > 2: none
    assert doc["fast_p"] == {"0": pytest.approx(5 / 6), "1": pytest.approx(2 / 6), "1.2": pytest.approx(2 / 6),
                             "1.5": pytest.approx(1 / 6), "2": 0.0}
    assert fast_p([row("z", outcome="degenerate")], 1.0) is None


def test_budget_share_before_the_first_candidate():
    rows = [row("a", setup_share=0.2, first_result_s=5.0), row("b", setup_share=0.6, first_result_s=9.0),
            row("c", setup_share=1.0, first_result_s=None), row("e", outcome="failed", setup_share=None)]
    b = summarize(rows, {})["budget_before_first_candidate"]
    assert b["problems"] == 3 and b["mean_share"] == pytest.approx(0.6) and b["median_share"] == 0.6
    assert b["no_candidate"] == ["c"]


def test_the_median_of_best_time_over_the_roofline_floor():
    rows = [row("a", speedup=2.0, best_over_floor=1.5), row("b", claimed=False, best_over_floor=3.0),
            row("c", claimed=False, best_over_floor=12.0), row("d", claimed=False, best_over_floor=None),
            row("e", outcome="failed", speedup=None, best_over_floor=2.0)]      # a failure: no best time of its own
    f = summarize(rows, {})["best_over_floor"]
    assert f["problems"] == 3 and f["median"] == 3.0 and f["no_floor"] == ["d"] and "floor" in f["meaning"]
    assert summarize([row("x", claimed=False)], {})["best_over_floor"]["median"] is None


def test_files(tmp_path):
    doc = summarize(ROWS, {"dir": "problems", "target": "cpu", "budget_per_s": 8.0})
    aggregate.write(tmp_path, doc)
    assert json.loads((tmp_path / "summary.json").read_text())["counted"] == 6
    rows = list(csv.DictReader(io.StringIO((tmp_path / "summary.csv").read_text())))
    assert [r["id"] for r in rows] == list("abcdefgh")
    assert rows[0]["counted_speedup"] == "2.0000" and rows[4]["counted_speedup"] == "1.0000"
    assert rows[6]["counted_speedup"] == "" and rows[7]["outcome"] == "pending"
    page = (tmp_path / "index.html").read_text()
    assert page.count("<rect") == 8 and "<svg" in page and "http://www.w3.org/2000/svg" in page
    assert "src=" not in page and "<link" not in page and "<script" not in page      # no external assets
    assert "Failures" in page and "Degenerate tasks" in page and "Flagged" in page
    assert "best time over the roofline floor" in page and "over floor" in page
    assert "best_over_floor" in rows[0]
    assert not list(tmp_path.glob(".*.tmp"))
