import pytest
import torch

from kernelgate import workload
from kernelgate.errors import KernelgateError
from kernelgate.records import Contract, Domain, Reason

REF = """
import torch
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = torch.nn.Embedding(n, 8)
    def forward(self, idx, mask, x):
        return self.emb(idx) * mask.unsqueeze(-1) + x
def get_inputs():
    return [torch.randint(0, 10, (4, 5)), torch.rand(4, 5) > 0.5, torch.rand(4, 5, 8)]
def get_init_inputs():
    return [10]
"""


def test_spec_parse_class_suffix(write):
    p = write("m.py", REF)
    assert workload.Spec.parse(p, "Model").cls == "Model"
    assert workload.Spec.parse(p + ":Other", "Model").cls == "Other"


def test_integer_and_bool_inputs_keep_dtype_and_values(write):
    ref = workload.load_reference(workload.Spec.parse(write("m.py", REF), "Model"))
    xs = ref.inputs(seed=3)
    g = torch.Generator().manual_seed(0)
    for kind in workload.TRIAL_KINDS:
        ys = workload.widen(xs, kind, g, Contract())
        assert ys[0].dtype == torch.int64 and torch.equal(ys[0], xs[0])
        assert ys[1].dtype == torch.bool and torch.equal(ys[1], xs[1])
        assert ys[2].dtype == torch.float32 and ys[2].shape == xs[2].shape


def test_widening_crosses_clamp_boundaries_unless_a_domain_is_declared():
    x = [torch.rand(1000) - 0.5]                    # all inside [-0.5, 0.5]
    g = torch.Generator().manual_seed(0)
    assert workload.widen(x, "wide", g, Contract())[0].abs().max() > 1.0
    assert workload.widen(x, "heavy", g, Contract())[0].abs().max() > 1.0
    dom = Contract(domain=((0, Domain(-0.5, 0.5)),))
    for kind in workload.TRIAL_KINDS:
        y = workload.widen(x, kind, g, dom)[0]
        assert y.min() >= -0.5 and y.max() <= 0.5


def test_perturb_keeps_nonnegative_tensors_nonnegative():
    ln = torch.nn.LayerNorm(16)
    bn = torch.nn.BatchNorm1d(16)
    state = {**ln.state_dict(), **{f"bn.{k}": v for k, v in bn.state_dict().items()}}
    out = workload.perturb(state, torch.Generator().manual_seed(0))
    assert not torch.equal(out["weight"], state["weight"]) and not torch.equal(out["bias"], state["bias"])
    assert (out["bn.running_var"] > 0).all()
    assert torch.equal(out["bn.num_batches_tracked"], state["bn.num_batches_tracked"])


def test_resize_changes_only_the_listed_dimension(write):
    ref = workload.load_reference(workload.Spec.parse(write("m.py", REF), "Model"))
    xs = ref.inputs(seed=0)
    ys = workload.resize(xs, (0, 1, 2), 0, 7, torch.Generator().manual_seed(0))
    assert [tuple(y.shape) for y in ys] == [(7, 5), (7, 5), (7, 5, 8)]
    assert ys[0].dtype == torch.int64 and ys[0].min() >= 0 and ys[0].max() < 10


@pytest.mark.parametrize("text, msg", [
    ("import torch\n", "defines no nn.Module class 'Model'"),
    ("def broken(:\n", "syntax error"),
    ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "no get_inputs"),
    ("raise RuntimeError('boom')\n", "importing"),
])
def test_load_errors_name_the_problem(write, text, msg):
    with pytest.raises(KernelgateError, match=msg) as e:
        workload.load_reference(workload.Spec.parse(write("bad.py", text), "Model"))
    assert e.value.reason is Reason.TASK_LOAD


def test_missing_file():
    with pytest.raises(KernelgateError, match="no such file"):
        workload.load_reference(workload.Spec.parse("does_not_exist.py", "Model"))


def test_inputs_function_from_another_file(write):
    body = REF.replace("def get_inputs", "def _unused")
    p = write("m.py", body)
    write("gen.py", "import torch\ndef make():\n    return [torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3) > 0, torch.rand(2, 3, 8)]\n")
    ref = workload.load_reference(workload.Spec.parse(p, "Model", inputs="gen.py:make"))
    assert [tuple(x.shape) for x in ref.inputs(0)] == [(2, 3), (2, 3), (2, 3, 8)]
