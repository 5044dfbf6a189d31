"""The optimize suite (benchmarks/suite/, benchmarks/optimize_suite.py) on CPU, at a tiny scale."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SUITE_DIR = ROOT / "benchmarks" / "suite"
DRIVER = ROOT / "benchmarks" / "optimize_suite.py"
FILES = sorted(SUITE_DIR.glob("*.py"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_suite_lists_every_workload():
    driver = _load(DRIVER, "kg_optimize_suite")
    assert len(FILES) == 12
    assert sorted(driver.SUITE) == [p.stem for p in FILES]


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_workload_runs_small_and_deterministic(path, monkeypatch):
    monkeypatch.setenv("KG_SUITE_SCALE", "0.02")
    m = _load(path, f"kg_suite_{path.stem}")           # a fresh module each time
    torch.manual_seed(0)
    model = m.Model(*m.get_init_inputs()).eval()
    torch.manual_seed(1)
    xs = m.get_inputs()
    assert all(x.dtype == torch.float32 for x in xs)
    assert sum(x.numel() for x in xs) < 20_000_000      # the scale shrinks the problem
    with torch.no_grad():
        a, b = model(*xs), model(*xs)
    assert isinstance(a, torch.Tensor) and a.dtype == torch.float32
    assert torch.isfinite(a).all()
    assert torch.equal(a, b)


def _part(workloads):
    return {"conditions": {"command": "x"}, "budget": "90", "target": "cuda", "workloads": workloads}


def _ok(name, speedup, claimed):
    return {"name": name, "status": "ok", "baseline_kind": "eager", "baseline_ms": 2.0, "eager_ms": 2.0,
            "compile_ms": 3.0, "best_ms": 2.0 / speedup, "speedup": speedup, "speedup_ci": [speedup, speedup],
            "speedup_claimed": claimed, "best_strategy": "s" if claimed else "baseline:eager", "candidates": 3,
            "accepted": 2, "seconds": 10.0, "rejected": {"mismatch": 1}}


def test_merge_geomean(tmp_path):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "all.json"
    part_a = _part({"mlp": _ok("mlp", 2.0, True), "gru": _ok("gru", 1.0, False)})
    part_a["running"] = "small_cnn"                     # that call ended during small_cnn
    a.write_text(json.dumps(part_a))
    b.write_text(json.dumps(_part({"attention": _ok("attention", 4.5, True),
                                   "avgpool": {"name": "avgpool", "status": "error", "error": "boom", "seconds": 5.0},
                                   "rms_norm": _ok("rms_norm", 1.01, False)})))   # unclaimed counts as 1.0
    r = subprocess.run([sys.executable, str(DRIVER), "--merge", str(a), str(b), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(out.read_text())["summary"]
    assert s["geomean_speedup"] == pytest.approx(math.exp((math.log(2.0) + math.log(4.5)) / 4))
    assert (s["workloads"], s["completed"], s["errors"], s["claimed"]) == (6, 4, ["avgpool", "small_cnn"], 2)
    assert s["slower_than_baseline"] == 0
    assert s["total_seconds"] == pytest.approx(45.0)
    assert "geomean speedup" in r.stdout
