"""oracle.py: the oracle's runs in a thread of the judge (Oracle.run_async), as the trials run them while the
candidate's call is out."""
import threading

import pytest
import torch

from kernelgate import api, oracle as oracle_mod
from kernelgate.config import gate_config

HEAD = "import torch\nimport torch.nn as nn\n"
REF = HEAD + """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)
    def forward(self, x):
        return torch.relu(self.lin(x))
def get_inputs():
    return [torch.randn(32, 16)]
def get_init_inputs():
    return []
"""
HONEST = HEAD + """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)
    def forward(self, x):
        return torch.clamp_min(self.lin(x), 0.0)
"""
WRONG = HONEST.replace("0.0)", "0.0) * 1.01")
WRONG_LATE = HONEST.replace("return torch.clamp_min(self.lin(x), 0.0)",
                            "y = torch.clamp_min(self.lin(x), 0.0)\n        return y * 1.01 if x.abs().max() > 20 else y")


def test_pending_hands_back_the_result_or_the_error():
    p = oracle_mod.Pending(lambda xs: [x * 2 for x in xs], [1, 2])
    assert p.result() == [2, 4]

    def fails(xs):
        raise ValueError("the reference failed")
    p = oracle_mod.Pending(fails, [])
    p.wait()                                  # joins without raising: another failure is on its way
    with pytest.raises(ValueError, match="the reference failed"):
        p.result()


@pytest.mark.slow
@pytest.mark.parametrize("memory,cand,accepted", [("full", HONEST, True), ("full", WRONG, False),
                                                  ("full", WRONG_LATE, False),
                                                  ("lean", HONEST, True)])
def test_trials_run_the_oracle_beside_the_call_except_in_the_lean_plan(write, tmp_path, monkeypatch, memory, cand,
                                                                       accepted):
    threads = []
    run = oracle_mod.Oracle.run

    def recorded(self, xs, *args, **kwargs):
        threads.append(threading.current_thread().name)
        return run(self, xs, *args, **kwargs)
    monkeypatch.setattr(oracle_mod.Oracle, "run", recorded)
    v = api.verify(write("ref.py", REF), write("cand.py", cand), config=gate_config(memory=memory),
                   store=str(tmp_path / "s.sqlite"))
    assert v.accepted is accepted, v.message
    beside = threads.count("kernelgate-oracle")
    if memory == "lean":
        assert beside == 0
    elif accepted:
        assert beside >= 5, threads            # every trial's runs (admission's are the judge's own)
    elif cand is WRONG_LATE:
        assert beside >= 1 and "mismatch" in v.reason.value, (threads, v.message)   # rejected in a trial
    assert not any(t.name == "kernelgate-oracle" for t in threading.enumerate())     # none left running


def test_one_ulp_moves_every_float_element_one_unit_and_leaves_the_rest():
    """The ill-conditioned trial's moved inputs (gate/session.py `ill`): each float element one unit in the last place of its dtype up or
    down, infinities, NaN and integer tensors as they were, the largest finite value never to infinity."""
    from kernelgate.oracle import one_ulp
    big = torch.finfo(torch.float32).max
    x = torch.tensor([1.0, -3.5, 0.0, float("inf"), float("nan"), big, 1e-30] * 40)
    y = one_ulp(x, "cpu", 7)
    up = torch.nextafter(x, torch.full_like(x, float("inf")))
    down = torch.nextafter(x, torch.full_like(x, float("-inf")))
    finite = torch.isfinite(x)
    assert bool(((y == up) | (y == down))[finite].all()) and bool(torch.isfinite(y[finite]).all())
    assert bool((y[finite] != x[finite]).all())
    assert bool((y != up)[finite].any()) and bool((y != down)[finite].any())       # both ways
    assert torch.equal(y[torch.isinf(x)], x[torch.isinf(x)]) and bool(torch.isnan(y[torch.isnan(x)]).all())
    ids = torch.arange(5)
    assert one_ulp(ids, "cpu", 7) is not None and torch.equal(one_ulp(ids, "cpu", 7), ids)
    assert torch.equal(one_ulp(x, "cpu", 7)[finite], y[finite])           # the draw is the seed's
    h = torch.randn(64).half()
    assert bool(((one_ulp(h, "cpu", 1) - h).abs() > 0).all()) and one_ulp(h, "cpu", 1).dtype == torch.float16


@pytest.mark.parametrize("body,continuous", [
    ("torch.linalg.solve(x @ x.T + 4 * torch.eye(x.shape[0]), x).relu().sum(-1)", True),
    ("torch.softmax(x * 2, -1) + torch.nn.functional.gelu(x)", True),
    ("torch.round(x)", False),                                   # a rounding
    ("x + (x > 0).float()", False),                              # a comparison
    ("x.to(torch.int32).float()", False),                        # a cast to integers
    ("torch.div(x, 0.5, rounding_mode='floor')", False),         # floor division under the name "div"
    ("x.max(-1).values", False),                                 # values beside indices: counted as steps
])
def test_a_reference_is_continuous_only_where_every_op_is(write, body, continuous):
    """An ill-conditioned trial's runs (gate/session.py `ill`) move inputs one ulp: only a reference continuous in its float inputs may
    have it, an allow-list of ops with steps (casts to integers, floor division) marked apart."""
    from kernelgate import workload
    from kernelgate.gate import task as task_mod
    from kernelgate.records import Contract
    src = ("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
           f"        return {body}\ndef get_inputs():\n    return [torch.randn(8, 8)]\n"
           "def get_init_inputs():\n    return []\n")
    task = task_mod.prepare(workload.Spec.parse(write("ref.py", src), "Model"), "cpu", Contract())
    assert task.oracle.continuous is continuous, (sorted(task.oracle.ops), task.oracle.stepped)
