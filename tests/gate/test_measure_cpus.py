"""On the CPU every row of a round runs on one CPU, the next round on the next (gate/measure.py); a worker that
moved itself elsewhere is caught after its batch."""
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kernelgate.gate import measure
from kernelgate.gate.session import Rejected, Session
from kernelgate.records import Reason

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")


def test_cpu_tasks_rotate_over_the_judges_cpus_and_gpu_tasks_do_not():
    if hasattr(os, "sched_getaffinity"):
        assert measure.round_cpus(SimpleNamespace(device="cpu")) == sorted(os.sched_getaffinity(0))
    assert measure.round_cpus(SimpleNamespace(device="cuda:0")) == []


@needs_affinity
def test_pin_puts_every_thread_on_the_cpu_and_a_move_is_rejected():
    code = "import threading, time; threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        s = SimpleNamespace(worker=SimpleNamespace(pid=p.pid), fail=lambda *a: Session.fail(None, *a))
        for _ in range(100):                    # its second thread started
            if len(os.listdir(f"/proc/{p.pid}/task")) == 2:
                break
            subprocess.run(["sleep", "0.05"])
        cpu = {min(os.sched_getaffinity(0))}
        measure.pin(s, cpu)
        assert all(os.sched_getaffinity(int(t)) == cpu for t in os.listdir(f"/proc/{p.pid}/task"))
        measure.check_pin(s, cpu, "round 1")
        every = os.sched_getaffinity(0)
        if len(every) < 2:
            pytest.skip("one CPU: no other CPU to move to")
        tid = max(int(t) for t in os.listdir(f"/proc/{p.pid}/task"))
        os.sched_setaffinity(tid, every)       # as the worker would itself, where seccomp does not refuse it
        with pytest.raises(Rejected) as e:
            measure.check_pin(s, cpu, "round 2")
        assert e.value.reason == Reason.TIMER and "round 2" in e.value.check.detail
    finally:
        p.kill()
        p.wait()


def test_no_worker_process_no_pinning():
    s = SimpleNamespace(worker=SimpleNamespace())
    measure.pin(s, {0})
    measure.check_pin(s, {0}, "round 1")


def test_every_row_of_a_round_shares_its_cpu_and_rounds_take_the_next(monkeypatch):
    import torch
    from kernelgate.config import GateConfig, TimingConfig
    from test_measure_lean import FakeSession

    monkeypatch.setattr(measure, "timing_pool", lambda task, n, rng: ([[torch.zeros(4)]], [True]))
    monkeypatch.setattr(measure, "round_cpus", lambda task: [3, 5])
    log, pins = [], []
    monkeypatch.setattr(measure, "pin", lambda s, cpus: pins.append((s.label, sorted(cpus), len(log))))
    monkeypatch.setattr(measure, "check_pin", lambda s, cpus, what: log.append((s.label, "checked", sorted(cpus))))
    sessions = {"eager": FakeSession("eager", log), "compile": FakeSession("compile", log)}
    measure.measure(SimpleNamespace(lean=False, device="cpu", floor=None, inputs=lambda seed: [torch.zeros(4)]),
                    sessions, GateConfig(),
                    TimingConfig(rounds=3, iters=2), lambda m: None)
    timed = [p for p in pins if len(p[1]) == 1]
    # 3 rounds of eager, compile and the harness (in eager's worker): each pinned before its batch
    assert [p[1][0] for p in timed] == [3] * 3 + [5] * 3 + [3] * 3
    assert [c[2] for c in log if c[1] == "checked"] == [[3]] * 3 + [[5]] * 3 + [[3]] * 3
    assert sorted(p[0] for p in pins if p[1] == [3, 5]) == ["compile", "eager"]      # both set free after
