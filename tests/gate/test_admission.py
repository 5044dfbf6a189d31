"""Task admission: a task is degenerate when a trivial output passes across trials, not when a 0-dim
output equals its own mean."""
import pytest
from kernelgate import api, workload
from kernelgate.gate import task as task_mod
from kernelgate.records import Contract

HEAD = "import torch\nimport torch.nn as nn\n"
LOSS = """
class Model(nn.Module):
    def forward(self, x):
        return ((x - 1.0) ** 2).mean()                  # a 0-dim loss; its expectation is 2
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
"""


def _prepare(write, body):
    return task_mod.prepare(workload.Spec.parse(write("ref.py", HEAD + body), "Model"), "cpu", Contract())


@pytest.mark.slow
def test_a_scalar_loss_is_admitted_and_its_expectation_rejected(write, tmp_path):
    task = _prepare(write, LOSS)
    assert task.admission.ok, task.admission.detail
    assert "constant at the mean" in task.admission.detail
    expectation = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.full((), 2.0)\n"
    v = api.verify(write("ref.py", HEAD + LOSS), write("cand.py", HEAD + expectation), store=str(tmp_path / "s.sqlite"))
    assert v.status.value == "rejected" and v.reason.value == "mismatch", v.message


@pytest.mark.slow
def test_an_output_constant_across_trials_is_still_degenerate(write):
    ones = LOSS.replace("return ((x - 1.0) ** 2).mean()", "return torch.softmax(x, dim=-1).sum(dim=-1)")
    task = _prepare(write, ones)
    assert not task.admission.ok and "constant at the mean" in task.admission.detail
