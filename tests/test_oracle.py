"""oracle.py: the oracle's runs in a thread of the judge (Oracle.run_async), as the trials run them while the
candidate's call is out."""
import threading

import pytest

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
