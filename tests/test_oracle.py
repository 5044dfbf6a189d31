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


SEPARABLE = "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n" \
    "        super().__init__()\n        self.bn = nn.BatchNorm1d(8)\n    def forward(self, M, b):\n" \
    "        return {body}\ndef get_inputs():\n    return [torch.randn(16, 8, 12), torch.randn(16, 8)]\n" \
    "def get_init_inputs():\n    return []\n"


@pytest.mark.parametrize("body,n", [
    ("torch.linalg.solve(M @ M.transpose(-1, -2) + 1e-3 * torch.eye(8), b)", 16),       # a batch of systems
    ("torch.linalg.solve(M @ M.transpose(-1, -2) + 1e-3 * torch.eye(8), b).T", 16),     # returned transposed
    ("torch.linalg.solve(M @ M.transpose(-1, -2) + 1e-3 * torch.eye(8), b).reshape(-1)", 16),   # flattened
    ("torch.softmax(M.sum(-1) * b, -1)", 16),
    ("b - b.mean(0)", 8),                                         # the rows move together, the columns apart
    ("self.bn.train()(b)", 8),                                    # training batch norm: each feature on its own
    ("torch.cumsum(b, 0)", 8),
    ("torch.linalg.solve(M.sum(0) @ M.sum(0).T + torch.eye(8), b.T).T", None),   # one system, its rhs batched
    ("b @ b.T", None),
])
def test_separable_finds_how_an_output_is_a_batch_of_independent_problems(write, body, n):
    """gate/session.py `each_problem`: an ill-conditioned batch is judged problem by problem only where moving one
    problem's inputs moves that problem's output alone, along a dimension or in flattened blocks (red team 70);
    the runs leave no trace in the reference's state."""
    from kernelgate import workload
    from kernelgate.gate import task as task_mod
    from kernelgate.records import Contract
    task = task_mod.prepare(workload.Spec.parse(write("ref.py", SEPARABLE.format(body=body)), "Model"), "cpu",
                            Contract())
    o = task.oracle
    xs = [torch.randn(16, 8, 12), torch.randn(16, 8)]
    out = o.run(xs).task[0]
    before = [b.clone() for b in o.model.buffers()]
    view = o.separable(xs, 0)
    o.moved_runs(xs, 2)
    assert all(torch.equal(a, b) for a, b in zip(before, o.model.buffers()))     # running statistics kept
    assert (view is None) if n is None else view(out).shape[0] == n
