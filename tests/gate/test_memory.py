"""The gate's device-memory plan (kernelgate/gate/memory.py): the decision, and the lean plan end to end on
the CPU (the same code paths a large GPU task takes: oracle and outputs at home, one pool entry, workers
released after every batch)."""
from __future__ import annotations

import pytest

from kernelgate import api
from kernelgate.config import TimingConfig, gate_config
from kernelgate.gate import memory

GiB = 1 << 30

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 64)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2
def get_inputs():
    return [torch.randn(128, 64)]
def get_init_inputs():
    return []
"""
HONEST = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 64)
    def forward(self, x):
        return torch.clamp_min(self.lin(x), 0.0).mul(2)
"""
def test_decide_lean_for_a_forward_over_a_gib_or_one_that_would_not_fit():
    small = memory.decide("cuda:0", 1 * GiB, 140 * GiB)
    assert not small.lean and small.home == "cuda:0"
    # 16 GiB fits five times in 80% of 140 GiB, but the default plan held 8x that on the H200 and ran out
    mid = memory.decide("cuda:0", 16 * GiB, 140 * GiB)
    assert mid.lean and mid.home == "cpu" and "16.00 GiB" in mid.reason
    assert memory.decide("cuda:0", int(1.01 * GiB), 140 * GiB).lean
    tight = memory.decide("cuda:0", GiB // 2, 2 * GiB)       # 5 x 0.5 GiB > 80% of a 2 GiB device
    assert tight.lean and "80%" in tight.reason
    big = memory.decide("cuda:0", 30 * GiB, 140 * GiB)
    assert big.lean and big.home == "cpu" and "30.00 GiB" in big.reason
    assert not memory.decide("cuda:0", 30 * GiB, 140 * GiB, "full").lean
    assert memory.decide("cpu", None, None, "lean").lean
    assert not memory.decide("cpu", None, None).lean
    with pytest.raises(ValueError, match="auto, lean or full"):
        memory.decide("cpu", None, None, "small")


def test_a_lean_plan_keeps_the_judges_data_on_a_device_with_room_for_it():
    """3.5 forwards and 4.5 inputs' worth within 80% of the device: the judge's data stays there (on the host,
    every judged call moved a task's worth through pageable memory); without room, or inputs unknown, the host."""
    roomy = memory.decide("cuda:0", 12 * GiB, 80 * GiB, ins=4 * GiB)        # 42 + 18 <= 64
    assert roomy.lean and roomy.home == "cuda:0" and "on the device" in roomy.reason
    assert memory.decide("cuda:0", 14 * GiB, 80 * GiB, ins=7 * GiB).home == "cpu"     # 49 + 31.5 > 64
    assert memory.decide("cuda:0", 16 * GiB, 140 * GiB, ins=4 * GiB).home == "cuda:0"
    assert memory.decide("cuda:0", 12 * GiB, 80 * GiB).home == "cpu"                  # inputs not counted
    assert memory.decide("cuda:0", 12 * GiB, 80 * GiB, "lean", ins=GiB).home == "cpu"  # asked: as before
    tight = memory.decide("cuda:0", GiB // 2, 2 * GiB, ins=GiB // 8)        # lean for want of room: the host
    assert tight.lean and tight.home == "cpu"
    small = memory.decide("cuda:0", GiB // 2, 140 * GiB, ins=GiB // 8)
    assert not small.lean and small.home == "cuda:0"


@pytest.mark.slow
def test_lean_plan_verifies_like_the_default(write, tmp_path):
    ref, cand = write("ref.py", REF), write("cand.py", HONEST)
    v = api.verify(ref, cand, config=gate_config(memory="lean"), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    assert any("lean memory plan" in n for n in v.notes)
    assert any(c.name == "timed-loop re-check" and c.ok for c in v.checks)


@pytest.mark.slow
def test_lean_plan_bench_times_with_workers_released_between_batches(write, tmp_path):
    ref, honest = write("ref.py", REF), write("honest.py", HONEST)
    res = api.bench(ref, [honest], config=gate_config(memory="lean", recheck_rate=1.0),
                    timing=TimingConfig(warmup_ms=5, rounds=2, iters=4), store=str(tmp_path / "s.sqlite"))
    rows = {r.label: r for r in res.rows}
    assert res.conditions["memory"]["lean"] is True and res.conditions["memory"]["home"] == "cpu"
    assert all(rows[k].timing is not None for k in ("eager", "compile", "honest")), rows
    assert rows["honest"].verdict.accepted and len(rows["honest"].timing.samples_ms) == 2 * 4   # rounds x iters


def test_memory_plan_must_be_known(write, tmp_path):
    from kernelgate.errors import KernelgateError
    ref, cand = write("ref.py", REF), write("cand.py", HONEST)
    with pytest.raises(KernelgateError, match="auto, lean or full"):
        api.verify(ref, cand, config=gate_config(memory="tiny"), store=str(tmp_path / "s.sqlite"))


@pytest.mark.gpu
def test_lean_plan_on_the_gpu_computes_there_and_keeps_data_on_the_host(write, tmp_path):
    """On a device the lean plan computes the oracle there (an fp64 forward on the host would take the budget
    on a convolution) and keeps what it compares on the host; verify and bench work as in the default plan."""
    from kernelgate import workload
    from kernelgate.gate.task import prepare
    from kernelgate.records import Contract
    ref, cand = write("ref.py", REF), write("cand.py", HONEST)
    v = api.verify(ref, cand, target="cuda", config=gate_config(memory="lean"), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    assert any("lean memory plan" in n for n in v.notes)
    res = api.bench(ref, [cand], target="cuda", config=gate_config(memory="lean", recheck_rate=1.0),
                    timing=TimingConfig(warmup_ms=5, rounds=2, iters=4), store=str(tmp_path / "s.sqlite"))
    rows = {r.label: r for r in res.rows}
    assert rows["cand"].verdict.accepted and rows["cand"].timing is not None, rows
    task = prepare(workload.Spec(str(ref), "Model"), "cuda", Contract(), "lean")
    assert task.lean and task.oracle.device.startswith("cuda") and task.oracle.home == "cpu"
    assert next(task.oracle.model.parameters()).is_cuda
    assert all(o.device.type == "meta" for o in task.out_meta) and all(x.device.type == "cpu" for x in task.given)


@pytest.mark.gpu
def test_a_lean_plan_with_room_on_the_gpu_keeps_the_judges_data_there_and_judges_as_before(write, tmp_path,
                                                                                             monkeypatch):
    """A forward over the lean threshold on a device with room: inputs, oracle and compared outputs on the device,
    the workers still released between calls and batches; an honest candidate accepted and timed, a wrong one
    rejected."""
    from kernelgate import workload
    from kernelgate.gate.task import prepare
    from kernelgate.records import Contract
    monkeypatch.setattr(memory, "LEAN_ABOVE", 1 << 10)       # this small task's forward counts as a large one
    ref, cand = write("ref.py", REF), write("cand.py", HONEST)
    wrong = write("wrong.py", HONEST.replace(".mul(2)", ".mul(2.01)"))
    task = prepare(workload.Spec(str(ref), "Model"), "cuda", Contract())
    assert task.lean and task.home.startswith("cuda") and task.oracle.lean and task.crossing_s == 0.0
    assert all(x.is_cuda for x in task.given) and "on the device" in task.memory.reason
    v = api.verify(ref, cand, target="cuda", store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    assert any("lean memory plan" in n and "outputs on the device" in n for n in v.notes), v.notes
    bad = api.verify(ref, wrong, target="cuda", store=str(tmp_path / "s.sqlite"))
    assert not bad.accepted and bad.reason.value == "mismatch", bad.message
    res = api.bench(ref, [cand], target="cuda", config=gate_config(recheck_rate=1.0),
                    timing=TimingConfig(warmup_ms=5, rounds=2, iters=4), store=str(tmp_path / "s.sqlite"))
    rows = {r.label: r for r in res.rows}
    assert rows["cand"].verdict.accepted and rows["cand"].timing is not None, rows
    assert res.conditions["memory"]["lean"] is True and res.conditions["memory"]["home"].startswith("cuda")


def test_oracle_away_from_home_makes_fp64_inputs_in_chunks_with_the_same_results(write, monkeypatch):
    """Inputs away from the compute device (the lean plan keeps them on the host), the oracle's fp64 inputs are
    converted a chunk at a time, before any task-dtype copy is placed; its outputs are bit for bit those of the
    plain path."""
    import torch

    from kernelgate import moves
    from kernelgate import oracle as oracle_mod
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    ref = load_reference(Spec(write("ref.py", REF), "Model"))
    o = oracle_mod.Oracle(ref, "cpu", Contract())
    xs = ref.inputs(3)
    o.probe(xs)
    plain = o.run(xs)
    monkeypatch.setattr(moves, "TO64_CHUNK", 1000)         # 8192 elements: nine chunks
    made = []
    real = oracle_mod.to_fp64
    monkeypatch.setattr(oracle_mod, "to_fp64", lambda x, d: made.append(x) or real(x, d))
    monkeypatch.setattr(oracle_mod.Oracle, "placed", lambda self, xs: False)
    away = o.run(xs)
    assert len(made) == 1 and made[0] is xs[0]
    assert all(torch.equal(a, b) for a, b in zip(plain.oracle, away.oracle))
    assert all(torch.equal(a, b) for a, b in zip(plain.task, away.task))
    assert oracle_mod.to_fp64(xs[0], "cpu").dtype == torch.float64
    t = torch.arange(6.0).reshape(2, 3).t()                       # non-contiguous: converted whole
    assert torch.equal(oracle_mod.to_fp64(t, "cpu"), t.double())
    assert oracle_mod.to_fp64(torch.arange(4), "cpu").dtype == torch.int64


def test_lean_admission_runs_on_the_device_and_again_through_the_host_when_out_of_memory(monkeypatch):
    """The lean plan's admission keeps its trials on the device (the judge is the only process then); out of
    device memory, it is done again through the host, and the oracle's home is the host's after either."""
    import types

    import torch

    from kernelgate.gate import task as task_mod
    from kernelgate.records import Check
    seen = []

    def admit(oracle, trials):
        seen.append((oracle.home, trials))
        if len(seen) == 1:
            raise torch.cuda.OutOfMemoryError("out of memory")
        return Check("task admission", True, "ok")
    monkeypatch.setattr(task_mod.admission, "admit", admit)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    oracle = types.SimpleNamespace(home="cpu")
    adm = task_mod._admit(oracle, lambda home: f"trials at {home}", "cuda", "cpu")
    assert adm.ok and seen == [("cuda", "trials at cuda"), ("cpu", "trials at cpu")] and oracle.home == "cpu"
    seen.clear()
    seen.append(None)                                            # no failure this time
    assert task_mod._admit(oracle, lambda home: home, "cuda", "cpu").ok and seen[1] == ("cuda", "cuda")
    assert oracle.home == "cpu"


def test_lean_trials_judge_on_the_device_with_the_worker_released(write):
    """In the lean plan on a GPU, the reference's runs on a call's inputs keep their outputs on the device, and
    the worker gives its memory back first (the judge's run is then the only one holding data there); home
    again afterwards, also when the check rejects. Elsewhere nothing changes."""
    import types

    from kernelgate import oracle as oracle_mod
    from kernelgate.gate.session import Session
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    o = oracle_mod.Oracle(load_reference(Spec(write("ref.py", REF), "Model")), "cpu", Contract())
    o.device = "cuda"                            # computes on a GPU, keeps its data on the host (not run here)
    released = []
    fake = types.SimpleNamespace(task=types.SimpleNamespace(lean=True, device="cuda", oracle=o),
                                 worker=types.SimpleNamespace(proc=object()), release=lambda shed=True: released.append(shed))
    with Session.judging(fake):
        assert o.home == "cuda" and released == [False]
    assert o.home == "cpu"
    try:
        with Session.judging(fake, release=False):
            assert o.home == "cuda"
            raise RuntimeError("rejected")
    except RuntimeError:
        pass
    assert o.home == "cpu" and released == [False]
    fake.task.lean = False                       # the default plan: as before
    with Session.judging(fake):
        assert o.home == "cpu"
    assert released == [False]


def test_probes_keep_masks_not_outputs(write):
    """A probe of the reference keeps the non-finite masks of one run at a time, not its outputs, and gives the
    device's cache back after every run (the lean plan probes between a worker's calls)."""
    import torch

    import weakref

    from kernelgate.gate import trials as trials_mod
    given, made = [], []            # per give-back: whether every output made so far was dead by then

    def model(x):
        y = x * 2
        made.append(weakref.ref(y))
        return y

    class Oracle:
        device, ops, state0 = "cpu", set(), {}

        def load(self, state):
            pass

        def give_back(self):
            given.append(all(r() is None for r in made))
    Oracle.model = staticmethod(model)
    pr = trials_mod.Prober.__new__(trials_mod.Prober)
    pr.oracle, pr.risky, pr.loaded = Oracle(), False, None
    assert pr.ok([torch.ones(3)], {}) and given[-1] and len(made) == 1
    n = len(given)
    assert not pr.ok([torch.tensor([1.0, float("nan")])], {}) and len(given) > n and given[-1]
    n = len(given)
    assert pr.ok([torch.tensor([1.0, float("nan")])], {}, ([torch.tensor([2.0, float("nan")])], {}))
    assert len(given) >= n + 2 and given[-1] and len(made) == 4


def test_admission_holds_one_trial_at_a_time(write):
    """When task admission's next trial is made, nothing of the previous one is alive (its inputs, oracle and
    task-dtype outputs, the tolerances built from them): on a GPU those are the bound's budget."""
    import gc
    import weakref

    from kernelgate import oracle as oracle_mod
    from kernelgate.gate import admission
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    ref = load_reference(Spec(write("ref.py", REF), "Model"))
    o = oracle_mod.Oracle(ref, "cpu", Contract())
    o.probe(ref.inputs(0))
    earlier, alive = [], []

    def trials():
        for seed in (1, 2, 3):
            gc.collect()
            alive.append([w() is not None for w in earlier])
            xs = ref.inputs(seed)
            runs = o.run(xs)
            earlier[:] = [weakref.ref(t) for t in (*xs, *runs.oracle, *runs.task)]
            yield xs, runs
            del xs, runs
    assert admission.admit(o, trials()).ok
    assert alive[0] == [] and not any(alive[1]) and not any(alive[2]), alive


def test_the_task_keeps_what_outputs_look_like_not_their_values(write):
    """The given inputs' outputs are kept for their dtype, shape and strides only (meta tensors): the values
    took a forward's worth of memory for the task's life (6 GiB of the judge's host in the lean plan)."""
    import torch

    from kernelgate import workload
    from kernelgate.gate.task import prepare
    from kernelgate.records import Contract
    ref = write("ref_t.py", "import torch\nclass Model(torch.nn.Module):\n"
                "    def forward(self, x):\n        return (x * 2).t(), x.sum(1).to(torch.float64)\n"
                "def get_inputs():\n    return [torch.randn(48, 32)]\ndef get_init_inputs():\n    return []\n")
    task = prepare(workload.Spec(ref, "Model"), "cpu", Contract())
    a, b = task.out_meta
    assert a.device.type == "meta" and b.device.type == "meta"
    assert (list(a.shape), a.stride(), a.dtype) == ([32, 48], (1, 32), torch.float32)
    assert (list(b.shape), b.dtype) == ([48], torch.float64) and task.out_bytes() == 32 * 48 * 4 + 48 * 8


def test_a_lean_timed_batch_keeps_only_the_outputs_that_fit():
    """The worker keeps every step's outputs of a timed batch until the judge picks the re-checked ones: a 6 GiB
    ReLU's six kept outputs took the gate to 3.6x its forward's peak on the H200. In the lean plan a batch has
    only as many steps as fit within the bound beside the pool entry and the input buffer."""
    from types import SimpleNamespace

    import torch

    from kernelgate.gate import memory as m
    gib = 1 << 30
    six = torch.empty(6 * gib // 4, device="meta")

    def task(lean: bool, out: int, peak: int = 12 * gib):
        return SimpleNamespace(memory=m.Plan(lean, "cpu", peak, 141 * gib, ""), given=[six], out_bytes=lambda: out)
    assert m.kept_outputs(SimpleNamespace(memory=None)) is None
    assert m.kept_outputs(task(False, 6 * gib)) is None
    assert m.kept_outputs(task(True, 6 * gib)) == 3              # (36 - 12 - 1.5 GiB) / 6 GiB
    assert m.kept_outputs(task(True, 1 << 20)) > 1000
    assert m.kept_outputs(task(True, 6 * gib, peak=8 * gib)) == 2   # never fewer than 2


def test_the_poison_is_two_outputs_worth_on_a_gpu_and_one_on_the_cpu_or_in_the_lean_plan():
    """gate/memory.py poison_bytes: on the CPU a block twice a large output's bytes is mmapped fresh each call and
    freed back to the system (benchmarks/results/cpu_poison_session32.json)."""
    class T:
        def __init__(self, device, lean):
            self.device, self.lean = device, lean

        def out_bytes(self):
            return 1 << 24
    assert memory.poison_bytes(T("cuda", False)) == 2 << 24
    assert memory.poison_bytes(T("cuda:0", True)) == 1 << 24
    assert memory.poison_bytes(T("cpu", False)) == 1 << 24


def test_spares_prime_ahead_unless_a_lean_plan_has_no_room_for_one_more_context():
    """A spare takes its CUDA context before it is taken (its prime hidden behind the current candidate) outside the
    lean plan, and in it where the gate's peak, the resident processes and one more context fit; the prime is sent
    ahead exactly then (gate/workers.py `spare_options`)."""
    from types import SimpleNamespace

    import torch

    from kernelgate.gate.workers import spare_options
    gib = 1 << 30
    cfg = gate_config()

    def task(lean, peak, home, ins_gib=0.25, capacity=80 * gib):
        plan = memory.Plan(lean, home, peak, capacity, "test")
        given = [torch.empty(1).expand(int(ins_gib * gib) // 4)]       # a size without the memory
        return SimpleNamespace(memory=plan, lean=lean, given=given, device="cuda:0")

    assert memory.spare_primes(SimpleNamespace(memory=None, lean=False))
    assert memory.spare_primes(task(False, 20 * gib, "cuda:0"))
    assert memory.spare_primes(task(True, int(1.2 * gib), "cuda:0"))           # just over LEAN_ABOVE: room to spare
    assert memory.spare_primes(task(True, 12 * gib, "cpu", ins_gib=4))          # data on the host: 63.5 GiB of 64
    assert not memory.spare_primes(task(True, 12 * gib, "cuda:0", ins_gib=4))   # and 18 GiB of inputs: no room
    assert not memory.spare_primes(task(True, 16 * gib, "cpu"))                 # 80 GiB of forwards alone
    assert not memory.spare_primes(task(True, None, "cpu"))                     # peak not measured
    roomy = spare_options(task(True, int(1.2 * gib), "cuda:0"), cfg)
    assert roomy["prime"]["op"] == "prime" and roomy["depth"] == 2                # two spares priming on a GPU
    tight = spare_options(task(True, 16 * gib, "cpu"), cfg)
    assert tight["prime"] is None and tight["depth"] == 1
    # the spares' contexts count: 5 x 12.15 GiB of forwards and 5 contexts leave room for one more, not two
    edge = task(True, int(12.15 * gib), "cpu")
    assert memory.spare_primes(edge, 1) and not memory.spare_primes(edge, 2)
    assert spare_options(edge, cfg)["prime"] is None
    cpu = SimpleNamespace(memory=None, lean=False, device="cpu")
    assert spare_options(cpu, cfg)["depth"] == 1 and spare_options(cpu, cfg)["prime"]["op"] == "prime"
