"""The red-team corpus: every exploit rejected for the right reason, every honest candidate accepted.

Cases live in tests/corpus/manifest.toml (one per VERIFICATION.md exploit row at least; GPU-only rows
are marked gpu and run with target cuda).
"""
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
sys.path.insert(0, str(CORPUS))

from run_corpus import load_cases, run_case  # noqa: E402

from kernelgate import api  # noqa: E402

CASES = load_cases()


def _param(case):
    marks = [pytest.mark.gpu] if case.get("gpu") else []
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case, tmp_path):
    r = run_case(api.verify, case, str(tmp_path / "store.sqlite"))
    assert r["match"], (f"{case['name']} (row {case['row']}): expected {case['expect']}/{r['want']}, got "
                        f"{r['status']}/{r['reason']}: {r['message']} notes={r['notes']}")


def test_every_cpu_exploit_row_is_covered():
    rows = {c["row"] for c in CASES if c["expect"] != "accepted" or c.get("note")}
    assert set(range(1, 14)) - {6} <= rows | {14}, sorted(rows)


def test_at_least_eight_honest_candidates():
    honest = [c for c in CASES if c["expect"] == "accepted" and c["row"] == 0 and not c.get("gpu")]
    assert len(honest) >= 8
