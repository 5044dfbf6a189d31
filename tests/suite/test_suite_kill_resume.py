"""The suite end to end on the CPU with the real optimize: tiny problems written here (two levels, one of them
degenerate), the suite killed with -9 once the first problem finished, then rerun with --resume: the finished
problem is not redone, the killed one's child did not live on and is continued with optimize's own --resume,
the rest completes and is aggregated."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

RELU = "torch.relu(x) * 2.0 + 1.0"
TANH = "torch.tanh(x * 0.5 + 0.25)"
ZEROS = "x * 0.0"


def children_of(out):
    """Processes still running a child of this suite (by their command line)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kernelgate.suite.child" in cmd and str(out) in cmd:
            found.append(int(pid))
    return found


def test_kill_9_then_resume_redoes_nothing_that_finished(problems, tmp_path):
    root = tmp_path / "problems"
    problems({"level1/1_relu": ""}, root=root, expr=RELU, shape="64, 64")
    problems({"level2/2_tanh": ""}, root=root, expr=TANH, shape="32, 64")
    problems({"level2/3_zeros": ""}, root=root, expr=ZEROS, shape="16, 16")
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "kernelgate", "suite", str(root), "--target", "cpu", "--budget-per", "8",
           "--max-candidates", "1", "--out", str(out)]
    first = out / "level1" / "1_relu" / "status.json"
    with open(tmp_path / "first.err", "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        t0 = time.monotonic()
        while not first.exists():
            assert p.poll() is None, (tmp_path / "first.err").read_text()
            assert time.monotonic() - t0 < 500, "the first problem did not finish"
            time.sleep(0.2)
        second = out / "level2" / "2_tanh" / "run.json"  # the second problem's optimize is under way
        while not second.exists() and time.monotonic() - t0 < 600 and p.poll() is None:
            time.sleep(0.2)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    assert "start level2/2_tanh" in (tmp_path / "first.err").read_text()
    kept = (first.read_bytes(), first.stat().st_mtime_ns)
    assert json.loads(first.read_bytes())["outcome"] == "ok"
    assert not (out / "level2" / "2_tanh" / "status.json").exists()
    deadline = time.monotonic() + 15                     # the running child died with the driver
    while children_of(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not children_of(out)

    t1 = time.monotonic()
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    print(f"resume: {time.monotonic() - t1:.0f} s\n{r.stderr}\n{r.stdout}")
    assert "3 problems" in r.stderr and "1 already finished, skipped (--resume)" in r.stderr
    assert "start level1/1_relu" not in r.stderr and "start level2/2_tanh" in r.stderr
    assert (first.read_bytes(), first.stat().st_mtime_ns) == kept                 # not redone
    log = (out / "level1" / "1_relu" / "optimize.log").read_text()
    assert log.count("--- attempt") == 1
    tlog = (out / "level2" / "2_tanh" / "optimize.log").read_text()
    assert tlog.count("--- attempt") == 2 and "resuming run" in tlog      # optimize's own --resume, same out dir
    assert "RuntimeWarning" not in tlog
    tanh = json.loads((out / "level2" / "2_tanh" / "status.json").read_text())
    assert tanh["outcome"] == "ok" and tanh["budget_s"] == 8.0 and tanh["setup_share"] is not None
    # the best time over the roofline floor of the forward on this machine (optimize's result.json carries the floor)
    assert tanh["floor_ms"] > 0 and tanh["best_over_floor"] == pytest.approx(tanh["best_ms"] / tanh["floor_ms"])
    for name in ("result.json", "optimized.py", "report.html", "report.md"):
        assert (out / "level2" / "2_tanh" / name).exists()
    zeros = json.loads((out / "level2" / "3_zeros" / "status.json").read_text())
    assert zeros["outcome"] == "degenerate" and zeros["reason"] == "degenerate"
    doc = json.loads((out / "summary.json").read_text())
    assert doc["finished"] == 3 and doc["counted"] == 2 and not doc["failures"] and not doc["pending"]
    assert [d["id"] for d in doc["degenerate"]] == ["level2/3_zeros"]
    assert doc["geomean_speedup"] >= 1.0 and doc["fast_p"]["0"] == 1.0
    assert doc["best_over_floor"]["problems"] == 2 and doc["best_over_floor"]["median"] > 0
    assert (out / "summary.csv").read_text().count("\n") == 4 and "<svg" in (out / "index.html").read_text()
    assert "geometric-mean speedup over the faster baseline" in r.stdout
