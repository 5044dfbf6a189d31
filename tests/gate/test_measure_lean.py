"""The interleaved measurement in the lean memory plan (gate/measure.py): every batch needs the timing pool sent
again (a task's worth through the host: on the H200, 2 rounds of two baselines of a 16 GiB task took 100 s), so
the warm-up opens an implementation's first batch and the harness's batch follows its host's, on one transfer."""
from types import SimpleNamespace

import torch

from kernelgate.config import GateConfig, TimingConfig
from kernelgate.gate import measure as measure_mod


class FakeSession:
    def __init__(self, label, log):
        self.label, self.log, self.trusted, self.pooled, self.rechecked = label, log, True, False, 0
        self.worker = SimpleNamespace(close=lambda: None)

    def pause(self):
        pass

    def resume(self):
        pass

    def send_pool(self, pool, scalable):
        self.pooled = True
        self.log.append((self.label, "pool"))

    def warm_up(self, plan, warmup_ms, warmup_min):
        assert self.pooled
        self.log.append((self.label, "warm"))

    def time_batch(self, tag, plan, null=False):
        assert self.pooled
        self.log.append((self.label, "harness" if null else "batch"))
        return SimpleNamespace(walls_ms=[1.0] * len(plan), samples_ms=[1.0] * len(plan))

    def release(self, shed=True):
        self.pooled = False
        self.log.append((self.label, "release"))

    def check_threads(self):
        pass


def _run(monkeypatch, lean: bool):
    monkeypatch.setattr(measure_mod, "timing_pool", lambda task, n, rng: ([[torch.zeros(4)]], [True]))
    log = []
    sessions = {"eager": FakeSession("eager", log), "compile": FakeSession("compile", log)}
    task = SimpleNamespace(lean=lean, device="cpu", floor=None, inputs=lambda seed: [torch.zeros(4)])
    timings, rejected = measure_mod.measure(task, sessions, GateConfig(), TimingConfig(rounds=2, iters=3),
                                            lambda m: None)
    assert set(timings) == {"eager", "compile"} and not rejected
    return log


def test_lean_measurement_sends_the_pool_once_per_batch_with_warm_up_and_harness_on_it(monkeypatch):
    log = _run(monkeypatch, lean=True)
    pools = [e for e in log if e[1] == "pool"]
    assert len(pools) == 4                 # 2 rounds x 2 baselines (it was 8: warm-ups and the harness apart)
    for label in ("eager", "compile"):
        mine = [what for who, what in log if who == label]
        # the first transfer: warm-up, then the batch; no transfer without a batch; released after each
        assert mine[:3] == ["pool", "warm", "batch"]
        assert mine.count("warm") == 1 and mine.count("batch") == 2 and mine.count("release") == 2
    eager = [what for who, what in log if who == "eager"]
    assert eager.count("harness") == 2     # the harness batch, every round, in the eager worker's transfer
    for i, e in enumerate(log):
        if e == ("eager", "harness"):
            assert log[i - 1] == ("eager", "batch")


def test_full_plan_measurement_is_unchanged(monkeypatch):
    log = _run(monkeypatch, lean=False)
    assert log[:4] == [("eager", "pool"), ("eager", "warm"), ("compile", "pool"), ("compile", "warm")]
    assert [e for e in log[:10] if e[1] == "pool"] == [("eager", "pool"), ("compile", "pool")]
    assert not any(e[1] == "release" for e in log)
    # round 1: eager, compile, the harness; round 2 rotated: compile, the harness, eager
    assert [e for e in log[4:10]] == [("eager", "batch"), ("compile", "batch"), ("eager", "harness"),
                                      ("compile", "batch"), ("eager", "harness"), ("eager", "batch")]
    # then the workload's own draws (measure.drawn): each batch's draws sent to every row, which times them once,
    # and the host times the harness alone on the same steps
    assert log[10:] == [("eager", "pool"), ("eager", "batch"), ("eager", "harness"), ("compile", "pool"),
                        ("compile", "batch")] * measure_mod.DRAWN_BATCHES


def test_lean_plan_skips_the_workloads_own_draws(monkeypatch):
    log = _run(monkeypatch, lean=True)
    assert len([e for e in log if e[1] == "batch"]) == 4       # 2 rounds x 2 baselines, nothing after


def test_a_round_that_would_end_past_the_deadline_is_not_started(monkeypatch):
    """Past the first two rounds (MIN_ROUNDS), a round is started only when it would end by the deadline, at the
    last round's length: a round of a big task's baselines takes seconds (on an H100, 8 GiB argmin: 42 s for 5
    rounds), and one started just before the deadline ran that much past it."""
    now = [0.0]
    monkeypatch.setattr(measure_mod.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(measure_mod, "timing_pool", lambda task, n, rng: ([[torch.zeros(4)]], [True]))
    log = []

    class Slow(FakeSession):
        def time_batch(self, tag, plan, null=False):
            now[0] += 2.0                     # every batch: 2 s on the judge's clock
            return super().time_batch(tag, plan, null)
    said = []
    sessions = {"eager": Slow("eager", log), "compile": Slow("compile", log)}
    task = SimpleNamespace(lean=True, device="cpu", floor=None)
    measure_mod.measure(task, sessions, GateConfig(), TimingConfig(rounds=10, iters=3), said.append,
                        deadline=15.0)
    batches = [e for e in log if e[1] == "batch"]
    # a round: 2 baselines + the harness batch = 6 s; after 2 rounds it is 12 s, before the deadline, but a third
    # would end at 18 s: two rounds (a third was started before), and the message says so
    assert len(batches) == 4 and now[0] == 12.0
    assert any(m.startswith("stopped after 2 rounds") for m in said)
