"""gate/session.py: what one session leaves behind for the next on the same task."""
import pytest
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    # never timed for a claim: no timed batch to re-check (its processes and threads are still checked)
    assert "not run" in next(c.detail for c in own.checks if c.name == "timed-loop re-check")
    assert any(c.name == "threads" for c in own.checks)
    full = judge_mod.judge(task, spec, GateConfig())
    assert full.status.value == "accepted", full.message
    layouts, fams = plan(full)
    assert repeated == [1] and layouts > 2 and fams > families.LEAN_FAMILIES, [c.name for c in full.checks]
    assert "not run" not in next(c.detail for c in full.checks if c.name == "timed-loop re-check")


MEMO = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(32) + 0.5)
        self.bias = nn.Parameter(torch.zeros(32))
        self._x = self._y = None
    def forward(self, x):                     # hands back the very output it returned for equal inputs before
        if self._x is not None and self._x.shape == x.shape and torch.equal(self._x, x):
            return self._y
        self._x, self._y = x.clone(), x * self.weight + self.bias
        return self._y
"""


@pytest.mark.slow
def test_the_repeated_call_lands_on_finite_inputs_whatever_the_draw(write, monkeypatch):
    """The trial called again on the same inputs is drawn in secret; where the draw lands on a trial with NaN inputs
    (NaN is never equal to itself, so a memo keyed on equality misses), the next trial with finite inputs is called
    again instead. Seeded so that the draw lands on a non-finite trial: a memo handing back its previous output is
    rejected `aliasing` (it was accepted when the repeat stayed on the drawn trial)."""
    import secrets as real
    from kernelgate.gate import session as session_mod
    from kernelgate.gate.trials import iter_trials, main_count
    ref, cand = write("ref.py", REF), write("cand.py", MEMO)
    task = task_mod.prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    n = main_count(task, GateConfig().trials)

    def finite(trial):
        return all(bool(torch.isfinite(x).all()) for x in trial.inputs
                   if isinstance(x, torch.Tensor) and x.is_floating_point())

    seed, k = next((s, k) for s in range(500) for k, trial in enumerate(iter_trials(task, s, n, short=False))
                   if k < n and not finite(trial))

    class Draws:                                     # the trials' seed and the repeated trial pinned; the rest secret
        def __init__(self):
            self.below = [k]

        def randbits(self, bits):
            return seed

        def randbelow(self, m):
            return self.below.pop(0) if self.below else real.randbelow(m)

    monkeypatch.setattr(session_mod, "secrets", Draws())
    v = judge_mod.judge(task, workload.Spec.parse(cand, "ModelNew"), GateConfig())
    assert v.status.value == "rejected" and v.reason.value == "aliasing", (seed, k, v.status, v.reason, v.message)


GLS = """
import torch
import torch.nn as nn
N, D = 96, 256
class Model(nn.Module):
    def forward(self, S, Y):
        d = torch.diagonal(S).rsqrt()
        return torch.linalg.solve(S * d[:, None] * d[None, :], Y)
def get_inputs():
    X = torch.randn(N, D)
    S = 0.5 * (X @ X.T) / D + 0.5 * torch.diag(0.5 + torch.rand(N))
    return [S, torch.randn(N, 1)]
def get_init_inputs():
    return []
"""

GLS_REGROUPED = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, S, Y):                  # the scaling grouped otherwise: other roundings of the same system
        d = torch.diagonal(S).rsqrt()
        return torch.linalg.solve(S * (d[:, None] * d[None, :]), Y)
"""

GLS_UNSCALED = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, S, Y):                  # wrong: the covariance itself, not its correlation matrix
        return torch.linalg.solve(S, Y)
"""


@pytest.mark.slow
def test_an_ill_conditioned_trial_is_judged_on_the_references_own_spread(write):
    """The "constant feature" and "smooth" families make a covariance singular or nearly so: the float32 solve is
    then off the fp64 oracle by much of its size, and another rounding of the same system lands anywhere in that
    spread (an exact copy of the reference was refused once in CI, 1.89 against 0.57 allowed; a regrouped scaling 2
    verifies in 4). A refused output there is judged again against the reference's error over its run and four
    more on inputs moved one ulp; a wrong solve is still refused, on the workload's own inputs."""
    from kernelgate.gate import correctness
    ref = write("gls.py", GLS)
    task = task_mod.prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    cfg = GateConfig()
    for _ in range(2):
        good = judge_mod.judge(task, workload.Spec.parse(write("regrouped.py", GLS_REGROUPED), "ModelNew"), cfg)
        assert good.status.value == "accepted", good.message
    bad = judge_mod.judge(task, workload.Spec.parse(write("unscaled.py", GLS_UNSCALED), "ModelNew"), cfg)
    assert bad.status.value == "rejected" and bad.reason.value == "mismatch", bad.message
    assert bad.message.startswith(("first call", "trial 1 ("))
    t = correctness.Tolerance(1, 1, 1, 1, 1, 1, 2.0 ** -24, False, "task dtype", own_fro=16 * 2.0 ** -24)
    assert t.ill                          # the task-dtype run's own error, not a contract's lower precision's
    assert not correctness.Tolerance(1, 1, 1, 1, 1, 1, 2.0 ** -24, False, "task dtype", own_fro=2 * 2.0 ** -24).ill
    assert not correctness.Tolerance(1, 1, 1, 1, 1, 1, 2.0 ** -24, False, "bf16 (contract)", own_fro=1e-7).ill
