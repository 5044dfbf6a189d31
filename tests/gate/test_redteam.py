"""The red-team corpus: every exploit rejected for the right reason, every honest candidate accepted.

Cases live in tests/corpus/manifest.toml (one per VERIFICATION.md exploit row at least; GPU-only rows
are marked gpu and run with target cuda). The boundary section (cases with an `attack` class) adds
attacks on the harness, the timed loop, the judge process, the baselines and later runs; cases marked
`pending` are expected to fail until the gate being rebuilt handles them (xfail, not strict: remove the
flag when a fix lands).
"""
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
sys.path.insert(0, str(CORPUS))

from run_corpus import EFFECTS, load_cases, run_case  # noqa: E402

from kernelgate import api  # noqa: E402

CASES = load_cases()

#: attack classes of the boundary section, and the least number of cases each must have
ATTACKS = {"harness": 5, "timed": 5, "judge": 5, "baseline": 3, "poison": 3, "domain": 6, "honest": 5}


def _param(case):
    marks = [pytest.mark.gpu] if case.get("gpu") else []
    marks.append(pytest.mark.slow)          # every case runs the gate end to end: a worker (bench: several)
    if case.get("pending"):
        marks.append(pytest.mark.xfail(strict=False, reason="pending gate rebuild"))
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case, tmp_path):
    r = run_case(api.verify, case, str(tmp_path / "store.sqlite"))
    assert r["match"], (f"{case['name']} (row {case['row']}): expected {case['expect']}/{r['want']}, got "
                        f"{r['status']}/{r['reason']}: {r['message']} notes={r['notes']} "
                        f"effects={r['effects_failed']}")


def test_every_cpu_exploit_row_is_covered():
    rows = {c["row"] for c in CASES if c["expect"] != "accepted" or c.get("note")}
    assert set(range(1, 14)) - {6} <= rows | {14}, sorted(rows)


def test_at_least_eight_honest_candidates():
    honest = [c for c in CASES if c["expect"] == "accepted" and c["row"] == 0 and not c.get("gpu")
              and c.get("attack", "honest") == "honest"]
    assert len(honest) >= 8


def test_every_boundary_class_is_covered():
    counts = Counter(c["attack"] for c in CASES if "attack" in c and not c.get("gpu"))
    assert set(counts) <= set(ATTACKS), sorted(counts)
    short = {k: (counts[k], n) for k, n in ATTACKS.items() if counts[k] < n}
    assert not short, f"classes with too few cases (have, need): {short}"
    attacks = [c for c in CASES if c.get("attack") not in (None, "honest")]
    assert len(attacks) >= 25, len(attacks)
    assert all(c["expect"] == "accepted" for c in CASES if c.get("attack") == "honest")


def test_boundary_cases_that_reach_outside_the_worker_run_isolated():
    """Attacks on the judge, the baselines' processes or shared files run their judge in a watched child
    process (effects), never in the test process itself, and name what must not have happened."""
    for c in CASES:
        outside = c.get("attack") in ("judge", "poison") or (c.get("attack") == "baseline" and c.get("mode") == "bench")
        if outside:
            assert c.get("effects"), f"{c['name']}: needs effects (runs the judge in a child process)"
        assert set(c.get("effects", [])) <= set(EFFECTS), c["name"]
        if "plant" in c.get("effects", []):
            assert c.get("plant"), f"{c['name']}: effect 'plant' needs plant paths"
        if c.get("mode") == "bench":
            assert c["expect"] == "unclaimed", f"{c['name']}: a bench case expects 'unclaimed'"


def test_manifest_is_consistent():
    """Names unique, files present and used, reasons among the gate's, `also` justified (sanity_check.py)."""
    import sanity_check
    sanity_check.FAILURES.clear()
    sanity_check.check_manifest(CASES)
    assert not sanity_check.FAILURES, sanity_check.FAILURES


@pytest.mark.slow
def test_corpus_does_what_it_claims():
    """tests/corpus/sanity_check.py, in plain PyTorch: references fast and deterministic, honest candidates
    right (also on widened inputs), every exploit doing what its docstring claims; so a case above that is
    rejected is rejected by the gate, not by an exploit that stopped working."""
    r = subprocess.run([sys.executable, str(CORPUS / "sanity_check.py")], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
