"""An own-precision oracle (oracle.own_precision): a reference written as GPU kernels runs in its own dtype only,
so the oracle is its task-dtype run, the tolerance its floor with the order term at its cap, and admission has
no lower-precision mutant. Forced on here (the CPU keeps fp64 for such sources: its interpreters take fp64)."""
import pytest
import torch

from kernelgate import api, oracle as oracle_mod
from kernelgate.gate import task as task_mod

HEAD = "import torch\nimport torch.nn as nn\n"
REF = HEAD + """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [torch.randn(64, 300)]
def get_init_inputs():
    return []
"""
HONEST = HEAD + """
class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
"""
BF16 = HEAD + """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.bfloat16(), dim=-1).float()
"""


def test_kernel_sources_on_a_gpu_only():
    triton_src = "import triton\n@triton.jit\ndef k(x): pass\n"
    assert oracle_mod.own_precision(triton_src, "cuda:0")
    assert oracle_mod.own_precision("ext = load_inline('e', cpp_sources=S, cuda_sources=C)\n", "cuda")
    assert not oracle_mod.own_precision(triton_src, "cpu")              # interpreters take fp64
    assert not oracle_mod.own_precision(REF, "cuda:0")                  # plain PyTorch: the fp64 oracle


@pytest.fixture
def own(monkeypatch):
    monkeypatch.setattr(task_mod, "own_precision", lambda source, device: True)


@pytest.mark.slow
@pytest.mark.parametrize("cand, status", [(HONEST, "accepted"), (BF16, "rejected")])
def test_the_own_run_is_the_oracle(own, write, tmp_path, cand, status):
    v = api.verify(write("ref.py", REF), write("cand.py", cand), store=str(tmp_path / "s.sqlite"))
    assert v.status.value == status, v.message
    adm = next(c for c in v.checks if c.name == "task admission")
    assert "oracle: the reference's own run" in adm.detail and "bf16" not in adm.detail


def test_the_oracle_never_builds_an_fp64_copy(own, write):
    from kernelgate import workload
    from kernelgate.records import Contract
    t = task_mod.prepare(workload.Spec.parse(write("ref.py", REF), "Model"), "cpu", Contract())
    assert t.oracle.model64 is None and t.oracle.own
    runs = t.oracle.run(t.given)
    assert torch.equal(runs.oracle[0], runs.task[0].double())
    assert t.oracle.reduce_ks == [oracle_mod.OPAQUE_K]


SPY = HEAD + """
SEEN = []
class Model(nn.Module):
    def forward(self, x):
        SEEN.append(x.device.type)         # a kernel handed a meta tensor reads address 0 and faults
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [torch.randn(64, 300)]
def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_kernel_reference_never_runs_on_meta_tensors(own, write, tmp_path, monkeypatch):
    """The roofline count, the fusion estimates and the profile's whole-forward fusion run a plain reference on
    meta tensors; the H200 port run's Triton references faulted there (illegal memory access)."""
    from kernelgate import workload
    from kernelgate.records import Contract
    t = task_mod.prepare(workload.Spec.parse(write("ref.py", SPY), "Model"), "cpu", Contract())
    seen = t.ref.module.SEEN
    assert seen and "meta" not in seen and t.floor is not None        # counted on a real run
    from kernelgate.profiling import fusion
    calls = []
    monkeypatch.setattr(fusion, "strategy_estimates", lambda *a, **k: calls.append(a) or {})
    api.optimize(write("ref2.py", SPY), target="cpu", budget=20, max_candidates=1, out=str(tmp_path / "o"),
                 store=str(tmp_path / "s.sqlite"))
    assert calls == []                                               # the search's estimates are skipped


def test_no_nan_inf_trial_without_a_second_opinion(own, write, monkeypatch):
    """With the reference's own run as the oracle nothing says its NaN/Inf handling is meant (a Triton ReLU by
    tl.maximum drops NaN where torch.relu keeps it: the H200 port of such a kernel was refused `nonfinite`)."""
    from kernelgate import workload
    from kernelgate.config import GateConfig
    from kernelgate.gate import correctness, trials
    from kernelgate.records import Contract
    t = task_mod.prepare(workload.Spec.parse(write("ref.py", REF), "Model"), "cpu", Contract())
    names = [tr.name for tr in trials.make_trials(t, 3, GateConfig().trials)]
    assert names and not any(correctness.NONFINITE_TRIAL in n for n in names)
    monkeypatch.setattr(task_mod, "own_precision", lambda source, device: False)      # the fp64 oracle: kept
    t = task_mod.prepare(workload.Spec.parse(write("ref.py", REF), "Model"), "cpu", Contract())
    assert any(correctness.NONFINITE_TRIAL in tr.name for tr in trials.make_trials(t, 3, GateConfig().trials))
