"""gate/session.py: what one session leaves behind for the next on the same task."""
import torch

from kernelgate import workload
from kernelgate.config import GateConfig
from kernelgate.gate import judge as judge_mod, task as task_mod
from kernelgate.records import Contract

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(32) + 0.5)
        self.bias = nn.Parameter(torch.zeros(32))
    def forward(self, x):
        return x * self.weight + self.bias
def get_inputs():
    return [torch.randn(8, 32)]
def get_init_inputs():
    return []
"""

NO_BIAS = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(32) + 0.5)
        self.bias = nn.Parameter(torch.zeros(32))
    def forward(self, x):                     # right while the bias is zero: wrong after a trial's load
        return x * self.weight
"""


def test_a_session_failing_after_a_load_leaves_the_reference_at_its_initial_parameters(write):
    """A candidate rejected between the trials' loads of perturbed parameters must not leave the oracle holding them:
    the next session's first calls (judged against the reference) would reject an honest candidate."""
    ref = write("ref.py", REF)
    task = task_mod.prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    cfg = GateConfig()
    bad = judge_mod.judge(task, workload.Spec.parse(write("nobias.py", NO_BIAS), "ModelNew"), cfg)
    assert bad.status.value == "rejected" and bad.reason.value == "mismatch", bad.message
    assert "perturbed" in bad.message                  # rejected on a trial that loaded other parameters
    held = task.oracle.model.state_dict()
    assert all(torch.equal(held[k], v) for k, v in task.oracle.state0.items())
    good = judge_mod.judge(task, workload.Spec.parse(ref, "Model"), cfg)
    assert good.status.value == "accepted", good.message


def test_building_a_session_leaves_the_reference_as_it_is(write, monkeypatch):
    """A baseline builds in the background while a candidate's trials have other parameters loaded into the
    oracle: building may not set the oracle back (an honest torch.compile candidate was compared against the
    initial parameters and rejected, 28% off, in one optimize run of three)."""
    from kernelgate.gate import session as session_mod
    ref = write("ref.py", REF)
    task = task_mod.prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    state = {k: v + 1.0 for k, v in task.oracle.state0.items()}
    task.oracle.load(state)                                 # a trial's parameters, judged in another thread
    s = session_mod.Session(task, workload.Spec.parse(ref, "Model"), GateConfig(), "eager", trusted=True)
    try:
        s.build(baseline=True)
    finally:
        s.worker.close()
    held = task.oracle.model.state_dict()
    assert all(torch.equal(held[k], v) for k, v in state.items())


def test_own_code_is_judged_on_the_short_plan_and_a_candidate_on_the_full_one(write, monkeypatch):
    """The module emitted from a baseline (the reference's own code in the drop-in wrapper, `own_code`) gets the
    lean plan's trials: no repeated calls on one trial's inputs, at most two layouts, two input families (a 6 GiB
    task's full plan took over 130 s on the H200, past the suite's limit); the same code as a candidate gets all."""
    from kernelgate.gate import families, session as session_mod
    repeated = []
    real = session_mod.Session.repeated
    monkeypatch.setattr(session_mod.Session, "repeated", lambda self, *a: (repeated.append(1), real(self, *a))[1])
    ref = write("ref.py", REF)
    task = task_mod.prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    spec = workload.Spec.parse(ref, "Model")

    def plan(v):
        names = [c.name for c in v.checks]
        return sum("other layout" in n for n in names), sum("input family" in n for n in names)

    own = judge_mod.judge(task, spec, GateConfig(), own_code=True, reduced="the reference itself")
    assert own.status.value == "accepted", own.message
    layouts, fams = plan(own)
    assert not repeated and layouts <= 2 and 1 <= fams <= families.LEAN_FAMILIES, [c.name for c in own.checks]
    full = judge_mod.judge(task, spec, GateConfig())
    assert full.status.value == "accepted", full.message
    layouts, fams = plan(full)
    assert repeated == [1] and layouts > 2 and fams > families.LEAN_FAMILIES, [c.name for c in full.checks]
