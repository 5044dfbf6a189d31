"""The reduced trial plan (docs/GATE.md "Parametric variants") in the gate itself: fewer main trials, the same
kinds of checks (integrity, aliasing and input mutation on every call, edits, NaN/Inf and extreme values,
the timed-loop re-check, threads), and the plan recorded in the verdict. A wrong candidate is still rejected."""
import re
from dataclasses import replace

import pytest

from kernelgate import workload
from kernelgate.config import GateConfig
from kernelgate.gate import judge as judge_mod
from kernelgate.gate import trials as trials_mod
from kernelgate.gate.task import prepare
from kernelgate.records import Contract
from kernelgate.search.policy import SearchConfig

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
    def forward(self, x):
        return torch.tanh(self.lin(x)) * 2.0
def get_inputs():
    return [torch.randn(64, 32)]
def get_init_inputs():
    return [32]
"""
GOOD = REF + "\nclass ModelNew(Model):\n    pass\n"
WRONG = REF + """
class ModelNew(Model):
    def forward(self, x):
        y = super().forward(x)
        return y if float(x.abs().max()) < 6.0 else y + 1e-2    # wrong on heavy-tailed and wide inputs
"""


def kinds(names) -> set[str]:
    """The kinds of check in a plan: each trial's kind, and each note of a main trial on its own (a note may
    sit on another trial in a shorter plan), "plain" for a main trial with perturbed parameters alone."""
    out = set()
    for name in names:
        k = kind(name)
        out.add(k)
        if k.startswith("trial (") and name != judge_mod.REDUCED_PLAN:
            notes = k[len("trial ("):-1].split(", ")
            out.update(notes)
            if notes == ["perturbed params"]:
                out.add("plain")
    return {k for k in out if not (k.startswith("trial (") and "," in k)}


def kind(name: str) -> str:
    """A check's kind: trial numbers and distributions dropped ("trial 3 (heavy, perturbed params)" ->
    "trial (perturbed params)")."""
    if name.startswith("trial ") and "(" in name and name != judge_mod.REDUCED_PLAN:
        notes = [re.sub(r" offset \d+$", "", n) for n in name[name.index("(") + 1:-1].split(", ")
                 if n not in workload.TRIAL_KINDS]       # an offset is a layout's, not a kind of its own
        return "trial (" + ", ".join(sorted(re.sub(r"\d+", "N", n) for n in notes)) + ")"
    return re.sub(r"\d+", "N", name)


def main_trials(v) -> int:
    return sum(1 for c in v.checks if re.match(r"trial \d+ \(", c.name))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    d = tmp_path_factory.mktemp("variant")
    (d / "ref.py").write_text(REF)
    return d, prepare(workload.Spec.parse(str(d / "ref.py"), "Model"), "cpu", Contract())


def _judge(task, src: str, cfg: GateConfig, reduced: str = ""):
    d, t = task
    path = d / f"cand_{abs(hash((src, cfg.trials, reduced)))}.py"
    path.write_text(src)
    v, s = judge_mod.judge_session(t, workload.Spec(str(path), "ModelNew"), cfg, reduced=reduced)
    s.worker.close()
    return v


def test_plan_keeps_every_kind_of_trial():
    """make_trials with the variants' main trials (4) still has the given trial, perturbed and negated parameters, the edits, the
    NaN/Inf and the extreme-values trials (judge-side, no worker)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        (p := __import__("pathlib").Path(d) / "ref.py").write_text(REF)
        t = prepare(workload.Spec.parse(str(p), "Model"), "cpu", Contract())
        for seed in (1, 2, 3):
            full = kinds(tr.name for tr in trials_mod.make_trials(t, seed, GateConfig().trials))
            few = kinds(tr.name for tr in trials_mod.make_trials(t, seed, SearchConfig().variant_trials))
            assert few == full, (seed, full ^ few)
            assert any("NaN/Inf" in k for k in few) and any("extreme" in k for k in few)
            assert any("negated" in k for k in few) and any(k.startswith("edit") for k in few)
            assert "plain" in few and any(k.startswith(trials_mod.LAYOUT) for k in few)


@pytest.mark.slow
def test_reduced_plan_runs_the_same_kinds_of_checks(task):
    full = _judge(task, GOOD, GateConfig())
    reduced = _judge(task, GOOD, replace(GateConfig(), trials=SearchConfig().variant_trials), reduced="a parametric variant of x [abc]")
    assert full.accepted and reduced.accepted, (full.message, reduced.message)
    assert main_trials(full) == 8 and main_trials(reduced) == 4
    kinds_full = kinds(c.name for c in full.checks)
    kinds_reduced = kinds(c.name for c in reduced.checks) - {kind(judge_mod.REDUCED_PLAN)}
    assert kinds_reduced == kinds_full, kinds_full ^ kinds_reduced
    for must in ("isolation", "timed-loop re-check", "threads", "build"):
        assert must in kinds_reduced
    plan = [c for c in reduced.checks if c.name == judge_mod.REDUCED_PLAN]
    assert len(plan) == 1 and plan[0].detail.startswith("4 main trials: a parametric variant")
    assert not any(c.name == judge_mod.REDUCED_PLAN for c in full.checks)


@pytest.mark.slow
def test_reduced_plan_still_rejects_a_wrong_variant(task):
    v = _judge(task, WRONG, replace(GateConfig(), trials=SearchConfig().variant_trials), reduced="a parametric variant of x [abc]")
    assert not v.accepted and v.reason.value in ("mismatch", "recheck"), (v.reason, v.message)


@pytest.mark.slow
def test_a_judgement_past_its_deadline_ends_rejected_for_the_budget(write):
    """A search's budget bounds the judgement (a big task's trials take seconds each): past the deadline the next
    request ends it rejected (timeout, the check named "budget"), never accepted; without one, the same passes."""
    import time

    from kernelgate.records import Reason, Status
    ref = write("ref.py", REF)
    cand = write("cand.py", GOOD)
    task = prepare(workload.Spec(ref, "Model"), "cpu", Contract())
    cfg = GateConfig()
    v, s = judge_mod.judge_session(task, workload.Spec(cand, "ModelNew"), cfg, deadline=time.monotonic() + 0.5)
    s.worker.close()
    assert v.status is Status.REJECTED and v.reason is Reason.TIMEOUT, (v.status, v.reason, v.message)
    assert any(c.name == "budget" and not c.ok for c in v.checks)
    v, s = judge_mod.judge_session(task, workload.Spec(cand, "ModelNew"), cfg)
    s.worker.close()
    assert v.accepted, v.message
