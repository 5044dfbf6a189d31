"""Phase accounting (search/phases.py): exclusive nesting, the collapsing confirmation, per-candidate figures on
a fake clock; and an optimize run's result.json "phases" summing to its seconds."""
from __future__ import annotations

import json

import pytest

from kernelgate.search.phases import Phases, summary_line

from search_fakes import FakeClock


def test_nested_phases_are_exclusive_and_sum_to_the_total():
    clock = FakeClock(100.0)
    ph = Phases(clock)
    clock.t += 2.0                              # unaccounted
    with ph.timed("baselines"):
        clock.t += 3.0
        with ph.timed("profiling"):
            clock.t += 1.0
    with ph.candidate("c1"):
        with ph.timed("build"):
            clock.t += 4.0
        with ph.timed("trials"):
            clock.t += 5.0
    with ph.timed("confirmation", collapse=True):
        with ph.candidate("c1"):
            with ph.timed("build"):             # inside the confirmation: counted as confirmation
                clock.t += 6.0
    d = ph.to_json()
    assert d["seconds"] == {"baselines": 3.0, "build": 4.0, "trials": 5.0, "profiling": 1.0, "confirmation": 6.0}
    assert d["total_s"] == 21.0 and d["unaccounted_s"] == 2.0
    assert sum(d["seconds"].values()) + d["unaccounted_s"] == pytest.approx(d["total_s"])
    assert d["per_candidate"] == {"c1": {"build": 4.0, "trials": 5.0}}     # the confirmation is the run's
    assert d["candidates"] == 1
    assert list(d["seconds"])[:2] == ["baselines", "build"]           # the run's order


def test_since_counts_the_time_before_the_search_as_prepare():
    clock = FakeClock(50.0)
    t0 = clock()
    clock.t += 7.0
    ph = Phases(clock)
    ph.since(t0, "prepare")
    clock.t += 1.0
    d = ph.to_json()
    assert d["seconds"]["prepare"] == 7.0 and d["total_s"] == 8.0


def test_an_exception_still_closes_the_phase():
    clock = FakeClock()
    ph = Phases(clock)
    with pytest.raises(RuntimeError):
        with ph.timed("build"):
            clock.t += 1.5
            raise RuntimeError("x")
    assert ph.seconds == {"build": 1.5}


def test_summary_line():
    line = summary_line({"seconds": {"baselines": 30.0, "trials": 15.0}, "total_s": 60.0, "unaccounted_s": 1.0,
                         "candidates": 4})
    assert line.startswith("time: 60 s, 4 candidates (6.0 per 90 s): baselines 30.0 s (50%), trials 15.0 s (25%)")
    assert summary_line({}) == "time: (no phases recorded)"


@pytest.mark.slow
def test_optimize_records_phases_that_sum_to_its_seconds(tmp_path, optimize_tiny, proj):
    import time

    t0 = time.monotonic()
    res = optimize_tiny(tmp_path, proj).result
    wall = time.monotonic() - t0
    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    ph = doc["phases"]
    assert ph == res.phases
    secs = ph["seconds"]
    for name in ("prepare", "baselines", "worker start", "build", "trials", "re-check", "emitted check"):
        assert secs.get(name, 0) > 0, name
    assert ph["candidates"] == doc["candidates"] == 1
    assert set(ph["per_candidate"]) == {e["candidate"]["id"] for e in doc["evaluations"]}
    # the candidate's worker: the spare started while the baselines built, there and alive when taken; a
    # confirmation (the candidate looked faster, as a loaded machine's noise can make it) takes one more
    confirmed = len(doc["confirmations"])
    assert len(ph["spare_takes"]) == 1 + confirmed, (ph["spare_takes"], doc["confirmations"])
    assert ph["spare_takes"][0]["spare"] and ph["spare_takes"][0]["alive"]
    # the phases and what no phase covers make up the run; no phase covers much
    assert sum(secs.values()) + ph["unaccounted_s"] == pytest.approx(ph["total_s"], abs=0.01)
    assert ph["unaccounted_s"] <= max(2.0, 0.05 * ph["total_s"])
    # the run's total: from before prepare to the emitted check, so it holds the search's seconds and fits in
    # the call
    assert doc["seconds"] <= ph["total_s"] <= wall
