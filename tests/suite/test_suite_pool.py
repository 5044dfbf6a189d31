"""The local pool and the driver, with a stand-in child (no optimize): slots with their own device id and
cores, a worker killed with -9 replaced and its problem retried once, failures / degenerate tasks / timeouts
classified, --resume redoing nothing that finished, exit codes."""
import json
import os

import pytest

from kernelgate import cli
from kernelgate.errors import KernelgateError
from kernelgate.suite import executors, runner
from kernelgate.suite.executors import plan_slots
from kernelgate.suite.runner import Settings, Suite


def settings(root, out, fake_child, lines, **kw):
    return Settings(root=str(root), out=str(out), budget_per="10", command=fake_child, say=lines.append, **kw)


def status(out, pid):
    return json.loads((out / pid / "status.json").read_text())


def test_slots_split_cores_and_pin_devices():
    cores = len(os.sched_getaffinity(0))
    slots = plan_slots("cpu", workers=2, devices="7,9")
    assert [s.device for s in slots] == ["7", "9"]
    assert all(len(s.cpus) == max(1, cores // 2) for s in slots)
    if cores >= 2:
        assert not set(slots[0].cpus) & set(slots[1].cpus)
    env = executors.slot_env(slots[1], {})
    assert env["CUDA_VISIBLE_DEVICES"] == "9" and env["OMP_NUM_THREADS"] == str(len(slots[1].cpus))
    one = plan_slots("cpu")
    assert len(one) == 1 and one[0].cpus == () and one[0].device is None      # one slot: the host as it is
    assert "OMP_NUM_THREADS" not in executors.slot_env(one[0], {})
    with pytest.raises(KernelgateError, match="ids for 3 workers"):
        plan_slots("cpu", workers=3, devices="0,1")
    with pytest.raises(KernelgateError, match="only 2 GPUs"):
        plan_slots("cuda", workers=3, devices="0,1")
    assert [s.device for s in plan_slots("cuda", devices="2,3")] == ["2", "3"]


def test_a_killed_worker_is_replaced_and_its_problem_retried_once(problems, fake_child, seen_by, tmp_path):
    root = problems({"level1/a": "speedup=1.5 sleep=0.3", "level1/b": "die=1 sleep=0.2", "level2/c": "die=5",
                     "level2/d": "", "level2/e": "speedup=2.0"})
    out, lines = tmp_path / "out", []
    doc = runner.run(settings(root, out, fake_child, lines, workers=2, devices="7,9"))
    b = status(out, "level1/b")
    assert b["outcome"] == "ok" and len(b["attempts"]) == 2
    assert b["attempts"][0]["rc"] == -9 and b["attempts"][0]["reason"] == "killed by SIGKILL"
    assert [s["attempt"] for s in seen_by(out, "level1/b")] == [1, 2]
    c = status(out, "level2/c")                                   # dies every time: failed after one retry
    assert c["outcome"] == "failed" and c["reason"] == "killed" and len(c["attempts"]) == 2
    assert "killed by SIGKILL, 2 times" in c["message"]
    for pid in ("level1/a", "level2/d", "level2/e"):              # the rest unaffected, one attempt each
        assert status(out, pid)["outcome"] == "ok" and len(status(out, pid)["attempts"]) == 1
    # every attempt ran on a slot with that slot's device id and its share of cores
    every = [s for p in ("level1/a", "level1/b", "level2/c", "level2/d", "level2/e") for s in seen_by(out, p)]
    assert {(s["slot"], s["cuda_visible"]) for s in every} == {("0", "7"), ("1", "9")}
    assert {s["omp"] for s in every} == {str(len(plan_slots("cpu", workers=2)[0].cpus))}
    assert doc["claimed"] == ["level1/a", "level2/e"] and [f["id"] for f in doc["failures"]] == ["level2/c"]
    assert [r["id"] for r in doc["retried"]] == ["level1/b", "level2/c"]
    assert doc["geomean_speedup"] == pytest.approx((1.5 * 2.0) ** (1 / 5))
    assert any("level1/b: killed by SIGKILL" in ln and "trying it again" in ln for ln in lines)
    starts = [ln for ln in lines if " start " in ln]
    assert len(starts) == 7 and sum("(attempt 2)" in ln for ln in starts) == 2
    firsts = [ln.split()[0] for ln in starts if "(attempt" not in ln]
    assert firsts == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"]          # numbered as started, 2 at a time
    assert any(ln.startswith("[2/5] start level1/b") and "(attempt 2)" in ln for ln in starts)


@pytest.mark.slow
def test_outcomes_are_classified(problems, fake_child, tmp_path):
    root = problems({"l/degenerate": "degenerate", "l/random": "error=random_task", "l/load": "error=task_load",
                     "l/crash": "crash", "l/slow": "sleep=30", "l/flag": "speedup=4.0", "l/kept": "speedup=1.0"})
    out, lines = tmp_path / "out", []
    doc = runner.run(settings(root, out, fake_child, lines, timeout_per=1.5))
    got = {r["id"]: (r["outcome"], r.get("reason")) for r in doc["rows"]}
    assert got == {"l/crash": ("failed", "crash"), "l/degenerate": ("degenerate", "degenerate"),
                   "l/flag": ("ok", None), "l/kept": ("ok", None), "l/load": ("failed", "task_load"),
                   "l/random": ("degenerate", "random_task"), "l/slow": ("failed", "timeout")}
    crash = status(out, "l/crash")
    assert "RuntimeError: the child fell over" in crash["message"] and len(crash["attempts"]) == 1   # not retried
    assert len(status(out, "l/slow")["attempts"]) == 1                                               # nor this
    assert [f["id"] for f in doc["flagged"]] == ["l/flag"] and doc["claimed"] == []
    assert doc["kept_baseline"] == ["l/kept"]
    assert doc["fast_p"]["0"] == pytest.approx(2 / 5)             # flag and kept finished; crash, load, slow failed
    assert status(out, "l/kept")["setup_share"] == pytest.approx(0.2)       # setup 2 s of a 10 s budget
    assert status(out, "l/kept")["report"] == "l/kept/report.html"
    assert any("FAILED timeout" in ln for ln in lines) and any("FLAGGED" in ln for ln in lines)


def test_resume_redoes_nothing_that_finished(problems, fake_child, seen_by, tmp_path):
    root = problems({"level1/a": "speedup=1.5", "level1/b": "crash", "level2/c": ""})
    out, lines = tmp_path / "out", []
    runner.run(settings(root, out, fake_child, lines))
    before = {p: (out / p / "status.json").read_bytes() for p in ("level1/a", "level1/b", "level2/c")}
    with pytest.raises(KernelgateError, match="already holds a suite"):
        runner.run(settings(root, out, fake_child, lines))
    lines.clear()
    doc = runner.run(settings(root, out, fake_child, lines, resume=True))
    assert not [ln for ln in lines if " start " in ln] and "3 already finished, skipped" in lines[0]
    assert {p: (out / p / "status.json").read_bytes() for p in before} == before
    assert doc["finished"] == 3
    # a problem without a status file (interrupted) is redone; --retry-failed redoes failures
    (out / "level2" / "c" / "status.json").unlink()
    lines.clear()
    runner.run(settings(root, out, fake_child, lines, resume=True, retry_failed=True))
    assert sorted(ln.split()[2] for ln in lines if " start " in ln) == ["level1/b", "level2/c"]
    assert len(seen_by(out, "level1/a")) == 1
    with pytest.raises(KernelgateError, match="budget_per_s was 10.0"):
        runner.run(Settings(root=str(root), out=str(out), budget_per="20", resume=True, command=fake_child,
                            say=lines.append))


def test_cli_prints_the_summary_and_exits_1_on_failures(problems, fake_child, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "child_command", lambda *a: executors.template_command(fake_child))
    root = problems({"level1/a": "speedup=1.5", "level1/b": "crash"})
    assert cli.main(["suite", str(root), "--out", str(tmp_path / "o1"), "--budget-per", "10"]) == 1
    cap = capsys.readouterr()
    assert "2 of 2 problems finished" in cap.out and "failed     level1/b (crash): exit status 1: RuntimeError" in cap.out
    assert "[1/2] start level1/a on slot 0" in cap.err and "[2/2] done  level1/b  FAILED crash" in cap.err
    root2 = problems({"a": "speedup=1.5"}, root=tmp_path / "p2")
    assert cli.main(["suite", str(root2), "--out", str(tmp_path / "o2"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["claimed"] == ["a"] and doc["fast_p"]["1.2"] == 1.0


def test_interrupted_suite_records_nothing_for_running_problems(problems, fake_child, tmp_path):
    root = problems({"a": "sleep=30"})
    out, lines = tmp_path / "out", []
    s = Suite(settings(root, out, fake_child, lines))

    def interrupt(job, slot):
        raise KeyboardInterrupt
    s.on_start = interrupt
    with pytest.raises(KeyboardInterrupt):
        s.run()
    assert not (out / "a" / "status.json").exists()
    assert json.loads((out / "summary.json").read_text())["pending"] == ["a"]


def test_out_inside_dir_is_not_rediscovered(problems, fake_child, tmp_path):
    root = problems({"level1/a": "speedup=1.5"})
    (root / "results" / "level1" / "a").mkdir(parents=True)          # what optimize leaves: a reference.py
    (root / "results" / "level1" / "a" / "reference.py").write_text((root / "level1" / "a.py").read_text())
    lines = []
    doc = runner.run(settings(root, root / "results", fake_child, lines))
    assert [r["id"] for r in doc["rows"]] == ["level1/a"]
