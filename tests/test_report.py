import math
import os
import re
import subprocess
import xml.etree.ElementTree as ET

from kernelgate.records import (Candidate, Evaluation, OptimizeResult, Reason, Speedup, Status, Timing,
                                Verdict)
from kernelgate.report import best_per_generation, convergence_svg, fingerprint_svg, write_report

CMDS = {"verify the best candidate": "kernelgate verify examples/rowsoftmax.py optimized.py --target cuda",
        "bench against eager and torch.compile": "kernelgate bench examples/rowsoftmax.py optimized.py"}
OK = Verdict(Status.ACCEPTED, Reason.OK, "all checks passed")


def _timing(ms, kind="candidate", spread=0.02):
    return Timing(kind, (ms * 0.99, ms, ms * 1.01), ms * 1.05, ms, spread, kind)


def _cand(i, strategy, gen, parent=None):
    return Candidate(id=f"{i:02d}" + "abcdef0123456789" * 4, strategy=strategy, source="class ModelNew: ...",
                     parent=parent, generation=gen)


def _result(strategies=("runtime:cudagraph", "rewrite:fused-softmax", "triton:row-softmax"), best=True, **kw):
    """Gen 0: two accepted + one rejected; gen 1: one accepted refinement of candidate 0."""
    base = _timing(2.0, "compile")
    c = [_cand(0, strategies[0], 0), _cand(1, strategies[1], 0), _cand(2, strategies[2], 0),
         _cand(3, strategies[0] + "+tuned", 1, parent=_cand(0, strategies[0], 0).id)]
    bad = Verdict(Status.REJECTED, Reason.MISMATCH, "max abs error 3.1e-02 > tolerance 1.2e-04 at [0, 17]\ntrial 3 of 8")
    ev = (Evaluation(c[0], OK, _timing(1.6), base, Speedup(1.25, 1.2, 1.3, 1.05, True)),
          Evaluation(c[1], OK, _timing(1.9), base, Speedup(1.05, 0.98, 1.1, 1.05, False)),
          Evaluation(c[2], bad),
          Evaluation(c[3], OK, _timing(4 / 3), base, Speedup(1.5, 1.4, 1.6, 1.05, True)))
    args = dict(workload="examples/rowsoftmax.py", target="cuda", device="cuda:0", baseline_kind="compile",
                baseline_ms=2.0, eager=_timing(3.0, "eager", 0.031), compiled=base,
                best=ev[3] if best else None, final=Speedup(1.5, 1.4, 1.6, 1.05, True) if best else None,
                best_ms=4 / 3 if best else 2.0, evaluations=ev,
                conditions={"gpu": "NVIDIA H200", "driver": "550.54", "torch": "2.13.0", "triton": "3.4.0",
                            "python": "3.12.3", "cuda": "12.8", "platform": "Linux-x86_64",
                            "command": "kernelgate optimize examples/rowsoftmax.py"},
                contract=("precision: the reference's own", "no in-place writes, no aliasing"),
                notes=("search stopped after 2 generations without improvement",), seconds=12.5)
    args.update(kw)
    return OptimizeResult(**args).to_json()


def _markers(svg_text):
    root = ET.fromstring(svg_text)
    return [el for el in root.iter() if "marker" in (el.get("class") or "").split()]


def test_all_files_written_and_self_contained(tmp_path):
    paths = write_report(_result(), tmp_path / "out", reproduce_cmds=CMDS)
    assert set(paths) == {"report.md", "report.html", "reproduce.sh", "convergence.svg", "fingerprint.svg"}
    for p in paths.values():
        assert p.parent == tmp_path / "out" and p.stat().st_size > 200
    md, page = paths["report.md"].read_text(), paths["report.html"].read_text()
    assert "](convergence.svg)" in md
    assert page.count("<svg") == 2 and "<style>" in page
    assert "<link" not in page and "src=" not in page and "<script" not in page
    for text in (md, page, paths["reproduce.sh"].read_text()):
        assert str(tmp_path) not in text


def test_markdown_lists_every_candidate_with_reasons(tmp_path):
    md = write_report(_result(), tmp_path, reproduce_cmds=CMDS)["report.md"].read_text()
    assert "# kernelgate report: examples/rowsoftmax.py on cuda (cuda:0)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 4
    for row, strategy in zip(rows, ["runtime:cudagraph", "rewrite:fused-softmax", "triton:row-softmax",
                                    "runtime:cudagraph+tuned"]):
        assert strategy in row
    assert "rejected" in rows[2] and "mismatch: max abs error 3.1e-02 > tolerance 1.2e-04" in rows[2]
    assert "trial 3 of 8" not in md  # only the message's first line
    assert "00abcdef" in rows[3] and "(best)" in rows[3] and "(best)" not in "".join(rows[:3])
    assert "1.25x" in rows[0] and "1.6 ms" in rows[0] and "| - | - |" in rows[2]


def test_summary_speedup_ci_baselines_conditions(tmp_path):
    paths = write_report(_result(), tmp_path, reproduce_cmds=CMDS)
    for text in (paths["report.md"].read_text(), paths["report.html"].read_text()):
        assert "Baseline: compile at 2 ms" in text
        assert "Speedup: 1.50x, 95% CI [1.40, 1.60] (claimed" in text
        assert "eager: 3 ms (±3.1%)" in text and "torch.compile: 2 ms (±2.0%)" in text
        for value in ("NVIDIA H200", "550.54", "2.13.0", "3.4.0", "3.12.3", "12.8", "kernelgate optimize"):
            assert value in text
        assert "fp64 oracle" in text and "docs/GATE.md" in text
        assert "no in-place writes, no aliasing" in text and "search stopped after 2 generations" in text
        assert "baseline is kept" not in text


def test_unclaimed_speedup_is_said(tmp_path):
    r = _result(final=Speedup(1.04, 0.99, 1.09, 1.05, False))
    md = write_report(r, tmp_path, reproduce_cmds={})["report.md"].read_text()
    assert "95% CI [0.99, 1.09] (not claimed" in md


def test_svg_markers_baseline_and_step_line(tmp_path):
    r = _result()
    paths = write_report(r, tmp_path, reproduce_cmds=CMDS)
    svg = paths["convergence.svg"].read_text()
    markers = _markers(svg)
    assert len(markers) == len(r["evaluations"]) == 4
    kinds = [m.get("class").split()[1] for m in markers]
    assert kinds == ["accepted", "accepted", "rejected", "accepted"]
    rejected = markers[2]
    assert rejected.tag.endswith("path") and rejected.get("stroke") == "#d32f2f"
    # the rejected cross is above (smaller y) than every accepted point
    assert all(float(m.get("cy")) > float(rejected.get("d").split(",")[1].split()[0]) for m in markers if m.tag.endswith("circle"))
    # the faster accepted candidate sits lower on the plot
    assert float(markers[3].get("cy")) > float(markers[0].get("cy")) > float(markers[1].get("cy"))
    root = ET.fromstring(svg)
    assert any(el.get("class") == "baseline" and el.get("stroke-dasharray") for el in root.iter())
    assert any(el.get("class") == "best" for el in root.iter())
    page = paths["report.html"].read_text()
    inline = page[page.index("<svg"): page.index("</svg>") + len("</svg>")]
    assert len(_markers(inline)) == 4


def test_best_per_generation_is_a_nonincreasing_step():
    r = _result()
    assert best_per_generation(r["evaluations"]) == {0: 1.6, 1: 4 / 3}
    assert best_per_generation([]) == {}
    evs = r["evaluations"]
    # a worse later generation keeps the earlier best
    worse = dict(evs[3], timing=dict(evs[3]["timing"], median_ms=5.0))
    assert best_per_generation([evs[0], worse]) == {0: 1.6, 1: 1.6}


def test_user_strings_escaped_in_html(tmp_path):
    evil = "<script>alert(1)</script>"
    r = _result(strategies=(evil, "rewrite:a&b", "x|y"))
    r["evaluations"][2]["verdict"]["message"] = "<img src=x onerror=alert(2)>"
    r["notes"].append('"><b>note</b>')
    paths = write_report(r, tmp_path, reproduce_cmds=CMDS)
    page = paths["report.html"].read_text()
    assert "<script" not in page and "<img" not in page and "<b>note" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "rewrite:a&amp;b" in page
    ET.fromstring(paths["convergence.svg"].read_text())  # still well-formed XML
    md = paths["report.md"].read_text()
    assert "<script" not in md and "x\\|y" in md


def test_no_best_candidate_keeps_baseline(tmp_path):
    r = _result(best=False)
    paths = write_report(r, tmp_path, reproduce_cmds=CMDS)
    for text in (paths["report.md"].read_text(), paths["report.html"].read_text()):
        assert "No candidate beat the faster baseline (compile); the baseline is kept." in text
        assert "Speedup:" not in text and "(best)" not in text


def test_reproduce_script(tmp_path):
    p = write_report(_result(), tmp_path, reproduce_cmds=CMDS)["reproduce.sh"]
    assert os.stat(p).st_mode & 0o777 == 0o755
    lines = p.read_text().splitlines()
    assert lines[:3] == ["#!/usr/bin/env bash", "set -euo pipefail", 'cd "$(dirname "$0")"']
    for label, cmd in CMDS.items():
        i = lines.index(f"# {label}")
        assert lines[i + 1] == cmd.replace("kernelgate ", '"${KG[@]}" ', 1)   # kernelgate found without a venv
    assert subprocess.run(["bash", "-n", str(p)]).returncode == 0


def test_robust_to_empty_and_nonfinite(tmp_path):
    r = _result(evaluations=(), best=False, final=None, eager=None, compiled=None, conditions={}, contract=(),
                notes=(), baseline_ms=math.nan, best_ms=math.inf)
    paths = write_report(r, tmp_path, reproduce_cmds={})
    md = paths["report.md"].read_text()
    assert "Baseline: compile at - " in md and "eager: -" in md and "No candidates were evaluated." in md
    assert not re.search(r"\b(nan|inf)\b", md) and "| # |" not in md
    assert _markers(paths["convergence.svg"].read_text()) == []
    # all rejected, no timings, missing keys
    r = _result(best=False)
    for ev in r["evaluations"]:
        ev["verdict"]["status"], ev["timing"], ev["speedup"] = "rejected", None, None
    del r["conditions"], r["eager"], r["speedup_ci"]
    paths = write_report(r, tmp_path / "b", reproduce_cmds={})
    markers = _markers(paths["convergence.svg"].read_text())
    assert [m.get("class") for m in markers] == ["marker rejected"] * 4
    assert "(not recorded)" in paths["report.md"].read_text()
    assert write_report({}, tmp_path / "c", reproduce_cmds={})["report.html"].exists()
    assert "kernelgate report: ? on ? (?)" in (tmp_path / "c" / "report.md").read_text()
    assert _markers(convergence_svg({})) == []


def test_fingerprint_plot_has_one_point_per_profiled_timed_candidate(tmp_path):
    doc = _result()
    ins = [{"bound": "memory", "bottleneck": "memory-bound: 61% of the floor",
            "distance_to_best": {"value": d, "basis": "launches"}} for d in (0.5, 1.0, None, 0.0)]
    for ev, i in zip(doc["evaluations"], ins):
        ev["insight"] = i
    doc["evaluations"][2]["insight"] = None                     # rejected: never profiled
    svg = fingerprint_svg(doc)
    assert len(_markers(svg)) == 3 and "launches" in svg
    assert "no profiled candidates" in fingerprint_svg(_result())
    paths = write_report(doc, tmp_path, reproduce_cmds=CMDS)
    assert "memory-bound: 61% of the floor" in paths["report.md"].read_text()


def test_confirmations_are_reported_and_the_best_row_is_found_by_id():
    """The kept candidate's figures come from a fresh measurement (best_ms differs from its search row),
    so the report marks the best row by candidate id and states each confirmation."""
    from kernelgate.report import render_markdown
    conf = ({"candidate": "x", "strategy": "triton:row-softmax", "search_ratio": 1.19, "search_ci": [1.16, 1.22],
             "fresh_ratio": 0.94, "fresh_ci": [0.91, 0.99], "confirmed": False},
            {"candidate": "y", "strategy": "runtime:cudagraph+tuned", "search_ratio": 1.5, "search_ci": [1.4, 1.6],
             "fresh_ratio": 1.47, "fresh_ci": [1.44, 1.5], "confirmed": True})
    r = _result(best_ms=1.36, confirmations=conf)
    md = render_markdown(r)
    assert "Confirmation of triton:row-softmax: 1.19x in the search; judged and timed afresh: 0.94x" in md
    assert "not confirmed, not kept" in md and "confirmed (the figures above are the fresh ones)" in md
    assert md.count("(best)") == 1 and "runtime:cudagraph+tuned (best)" in md
    assert r["best_id"] == r["evaluations"][3]["candidate"]["id"]


def test_a_confirmation_of_the_emitted_module_is_said_so():
    from kernelgate.report import render_markdown
    conf = ({"candidate": "y", "strategy": "rewrite:y", "search_ratio": 1.5, "search_ci": [1.4, 1.6],
             "fresh_ratio": 1.45, "fresh_ci": [1.4, 1.5], "confirmed": True, "module": "optimized.py"},)
    md = render_markdown(_result(confirmations=conf))
    assert "Confirmation of rewrite:y: 1.50x in the search; judged and timed afresh as the emitted optimized.py: " \
           "1.45x" in md


# ------------------------------------------------------------------ issue 12 item 9: reading the output

def _confirmed(r):
    """`r` as optimize writes it after a fresh confirmation of its best candidate (1.36 ms against 2.04 ms)."""
    best = r["evaluations"][3]
    r["confirmations"] = [{"candidate": best["candidate"]["id"], "strategy": best["candidate"]["strategy"],
                           "search_ratio": 1.5, "search_ci": [1.4, 1.6], "fresh_ratio": 1.5, "fresh_ci": [1.44, 1.55],
                           "fresh_threshold": 1.06, "fresh_ms": 1.36, "fresh_baseline_ms": 2.04,
                           "verdict": "accepted", "confirmed": True}]
    r["best_ms"], r["baseline_ms"], r["speedup"] = 1.36, 2.04, 1.5
    return r


def test_search_figures_and_fresh_figures_are_labelled(tmp_path):
    """The baselines and candidate tables are the search's figures, the summary's the fresh confirmation's:
    each says which, and every candidate row shows the baseline it was timed against."""
    from kernelgate.report import render_markdown
    md = render_markdown(_confirmed(_result()))
    assert "Best: runtime:cudagraph+tuned at 1.36 ms in the fresh confirmation (1.333 ms in the search)" in md
    assert "Baseline: compile at 2.04 ms (the faster of eager and torch.compile, timed side by side with the best " \
           "in the fresh confirmation)" in md
    assert "## Baselines (timed at the start of the search)" in md
    head = next(line for line in md.splitlines() if line.startswith("| # |"))
    assert "median (search)" in head and "baseline (search)" in head and "speedup (search)" in head
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert "| 1.6 ms | 2 ms | 1.25x |" in rows[0]
    # the confirmation: search and fresh figures side by side
    conf = md[md.index("## Confirmation"):]
    assert "| runtime:cudagraph+tuned | 1.333 ms | 2 ms | 1.50x | 1.36 ms | 2.04 ms | 1.50x | confirmed |" in conf
    page = (write_report(_confirmed(_result()), tmp_path, reproduce_cmds={})["report.html"]).read_text()
    assert "median (search)" in page and "Baselines (timed at the start of the search)" in page
    # without a confirmation the summary's figures are the search's, and it says so
    plain = render_markdown(_result())
    assert "timed side by side with the best in the search)" in plain and "## Confirmation" not in plain


def test_unreliable_timings_are_called_so(tmp_path):
    """A loaded machine's spreads (800%+) make a figure meaningless: the report says so, next to the figure
    and in the summary."""
    from kernelgate.report import UNRELIABLE_SPREAD, render_markdown
    r = _result(eager=_timing(3.0, "eager", 8.12))
    r["evaluations"][1]["timing"]["spread"] = 0.6
    md = render_markdown(r)
    assert "eager: 3 ms (±812.0%, unreliable)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert "unreliable" in rows[1] and "unreliable" not in rows[0]
    summary = md[md.index("## Summary"):md.index("## Baselines")]
    assert "unreliable" in summary and "eager" in summary and "812%" in summary
    quiet = render_markdown(_result())
    assert "unreliable" not in quiet
    assert 0.15 < UNRELIABLE_SPREAD <= 0.5


def _one(**kw):
    base = _timing(2.0, "compile")
    ev = (Evaluation(_cand(0, "runtime:cudagraph", 0), OK, _timing(1.6), base, Speedup(1.25, 1.2, 1.3, 1.05, True)),)
    return _result(evaluations=ev, best=False, **kw) | {"best_id": ev[0].candidate.id,
                                                        "best_strategy": "runtime:cudagraph", "best_ms": 1.6}


def test_one_candidate_plots_baseline_against_best():
    """With one timed candidate the convergence plot was a flat line and a dot, the fingerprint plot a
    lone dot: the convergence plot shows the baseline against the candidate instead."""
    svg = convergence_svg(_one())
    root = ET.fromstring(svg)
    bars = [el for el in root.iter() if "bar" in (el.get("class") or "").split()]
    assert len(bars) == 2
    assert "compile" in svg and "2 ms" in svg and "runtime:cudagraph" in svg and "1.6 ms" in svg
    assert not any(el.get("class") == "best" for el in root.iter())
    fp = _one()
    fp["evaluations"][0]["insight"] = {"distance_to_best": {"value": 0.0, "basis": "launches"}}
    assert _markers(fingerprint_svg(fp)) == [] and "fewer than two" in fingerprint_svg(fp)
    # two or more timed candidates keep the convergence plot
    assert not [el for el in ET.fromstring(convergence_svg(_result())).iter() if el.get("class") == "bar"]


def test_progress_line_shows_the_baseline_it_compares_with():
    """A progress line's ratio is over the baseline re-timed with the candidate: that figure is shown, and
    the claim is said in words (the old `ok~` was explained nowhere)."""
    from kernelgate.report import progress_line
    r = _result()
    line = progress_line(2, r["evaluations"][1], r["evaluations"][0])
    assert "1.9 ms vs compile 2 ms" in line and "1.05x" in line
    assert "not claimed" in line and "ok~" not in line and "best 1.25x" in line
    line = progress_line(1, r["evaluations"][0], r["evaluations"][0])
    assert "1.6 ms vs compile 2 ms" in line and "claimed" in line and "not claimed" not in line
    assert "REJECTED mismatch" in progress_line(3, r["evaluations"][2], None)
    assert "best: baseline" in progress_line(3, r["evaluations"][2], None)
    noisy = r["evaluations"][1] | {"baseline": dict(r["evaluations"][1]["baseline"], spread=2.0)}
    assert "unreliable" in progress_line(2, noisy, None)


def test_model_usage_per_candidate_with_its_gate_and_timing_seconds(tmp_path):
    """Candidates an LLM wrote carry their usage: report.md and report.html list each with the model, requests,
    tokens, cost, the seconds waiting for the model and the seconds of its gate and timing (result "phases")."""
    doc = _result()
    cands = doc["evaluations"]
    cands[1]["candidate"]["usage"] = {"model": "qwen-coder", "requests": 2, "retries": 1, "input_tokens": 1200,
                                      "output_tokens": 340, "cost_usd": None, "wait_s": 3.25, "queue_s": 0.5}
    cands[2]["candidate"]["usage"] = {"model": "claude", "requests": 1, "retries": 0, "input_tokens": 900,
                                      "output_tokens": 200, "cost_usd": 0.0123, "wait_s": 1.0, "queue_s": 0.0}
    doc["phases"] = {"per_candidate": {cands[1]["candidate"]["id"]: {"worker start": 0.5, "build": 1.0,
                                                                     "trials": 2.0, "timing": 1.5}}}
    paths = write_report(doc, tmp_path / "out", reproduce_cmds=CMDS)
    md, page = paths["report.md"].read_text(), paths["report.html"].read_text()
    assert "## Model usage per candidate" in md and "<h2>Model usage per candidate</h2>" in page
    row = next(line for line in md.splitlines() if "qwen-coder" in line)
    for want in ("2 (1 retried)", "1200 / 340", "unpriced", "| 3.8 |", "| 3.5 |", "| 1.5 |", "accepted"):
        assert want in row, (want, row)
    assert "$0.0123" in md and "rejected" in next(line for line in md.splitlines() if "claude" in line)
    plain = write_report(_result(), tmp_path / "plain", reproduce_cmds=CMDS)["report.md"].read_text()
    assert "Model usage" not in plain                     # the library's candidates cost no model requests
