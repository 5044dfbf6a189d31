"""The one comparator and the output-metadata checks (gate/checks.py), and the one verdict builder."""
from types import SimpleNamespace

import torch

from kernelgate.gate import checks, verdict
from kernelgate.gate.session import Rejected
from kernelgate.oracle import Runs
from kernelgate.records import Check, Contract, Reason, Status


def _runs(g: torch.Tensor, b: torch.Tensor) -> Runs:
    return Runs([g], [b], {"task dtype": [b]})


def _float_case():
    g = torch.randn(64, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return g, g.float()


def test_float_outputs_get_the_derived_tolerance():
    g, b = _float_case()
    [e] = checks.Comparator().expected(_runs(g, b))
    assert e.tol is not None and e.grid is None
    assert e.check(b.clone(), "t").ok
    assert not e.check(b + 1e-3, "t").ok


def test_an_output_non_finite_everywhere_on_nan_inputs_must_be_so_too():
    """Red team 35: a loss dropping its non-finite terms gave a plausible number where the reference's is NaN.
    Where the reference's output is non-finite only in places, those places are not judged."""
    g = torch.tensor(float("nan"), dtype=torch.float64)
    [e] = checks.Comparator().expected(_runs(g, g.float()))
    assert e.check(torch.tensor(float("inf")), "t", nonfinite_inputs=True).ok
    bad = e.check(torch.tensor(0.25), "t", nonfinite_inputs=True)
    assert not bad.ok and "non-finite inputs were dropped" in bad.detail
    g2, b2 = _float_case()
    g2[0, 0], b2[0, 0] = float("nan"), float("nan")
    [e2] = checks.Comparator().expected(_runs(g2, b2))
    c = b2.clone()
    c[0, 0] = 0.0                                      # NaN propagation differs between honest kernels
    assert e2.check(c, "t", nonfinite_inputs=True).ok


def test_a_broadcastable_or_retyped_output_is_never_compared():
    g, b = _float_case()
    [e] = checks.Comparator().expected(_runs(g, b))
    row = b[:1].clone()                                 # broadcasts against (64, 32)
    assert not e.check(row, "t").ok and "expected torch.float32 [64, 32]" in e.check(row, "t").detail
    assert not e.check(b.double(), "t").ok


def test_quantized_outputs_are_judged_in_grid_steps_everywhere():
    """Integer outputs of a quantizing reference: one step off at a few places passes (as in the trials);
    without quantizing ops they must be bit-identical. Admission uses the same comparator."""
    g = torch.arange(-100, 100, dtype=torch.int8).repeat(10)
    c = g.clone()
    c[0] += 1                                           # one element one step off: 0.05% of 2000
    grid = checks.Comparator(quantized=True).expect(g, g, {})
    assert grid.grid is not None and grid.check(c, "t").ok
    assert not grid.check(c + 2, "t").ok                   # two steps anywhere fail
    exact = checks.Comparator(quantized=False).expect(g, g, {"task dtype": g})
    assert exact.tol.exact and not exact.check(c, "t").ok
    assert checks.quantizing({"aten::round", "round"}) and not checks.quantizing({"add"})


def test_the_contract_sets_the_one_step_share():
    g = torch.zeros(1000, dtype=torch.int8)
    c = g.clone()
    c[:5] = 1                                           # 0.5% one step off
    assert not checks.Comparator(quantized=True).expect(g, g, {}).check(c, "t").ok
    assert checks.Comparator(quantized=True, one_step=0.01).expect(g, g, {}).check(c, "t").ok


def test_admission_compares_as_the_trials_do(monkeypatch):
    """Task admission builds its comparator from the oracle, as the task does for trials and re-checks."""
    oracle = SimpleNamespace(ops={"round", "mm"}, contract=Contract(one_step=0.02))
    assert checks.Comparator.of(oracle) == checks.Comparator(quantized=True, one_step=0.02)


def test_metadata_checks_dtype_shape_strides():
    ref = torch.zeros(4, 3)
    meta = {"dtype": "torch.float32", "shape": [4, 3], "stride": [3, 1], "device": "cpu", "aliased": False}
    assert checks.check_meta(meta, ref, "cpu", True, "o") is None
    assert checks.check_meta({**meta, "dtype": "torch.float64"}, ref, "cpu", True, "o")[0] is Reason.DTYPE
    assert checks.check_meta({**meta, "shape": [3, 4]}, ref, "cpu", True, "o")[0] is Reason.SHAPE
    assert checks.check_meta({**meta, "stride": [1, 4]}, ref, "cpu", True, "o")[0] is Reason.STRIDE
    assert checks.check_meta({**meta, "stride": [1, 4]}, ref, "cpu", False, "o") is None
    assert checks.check_meta({**meta, "device": "cuda:0"}, ref, "cpu", True, "o")[0] is Reason.DEVICE


def test_described_outputs():
    rules = checks.Outputs(single=True, device="cpu")
    ref = [torch.zeros(4, 3)]
    meta = {"dtype": "torch.float32", "shape": [4, 3], "stride": [3, 1], "device": "cpu", "aliased": False}
    assert rules.described(True, [meta], ref, "t") is None
    assert rules.described(False, [meta], ref, "t").reason is Reason.OUTPUT_TYPE
    assert rules.described(True, [{"dtype": "torch.float32"}], ref, "t").check == "output structure"
    assert rules.described(True, [{**meta, "aliased": True}], ref, "t").reason is Reason.ALIASING
    assert checks.Outputs(single=True, device="cpu", inplace=True).described(True, [{**meta, "aliased": True}],
                                                                              ref, "t") is None
    assert rules.described(True, [{**meta, "shape": [4, 1]}], ref, "t").reason is Reason.SHAPE


def test_outputs_share_memory_only_where_the_reference_s_do():
    """`return y, y` for the reference's `y, y.clone()` (red team 32): a caller's in-place edit of one output
    would change the other. Allowed where the reference's outputs share memory too."""
    from kernelgate.oracle import shared_outputs
    from kernelgate.sandbox.sensors import describe_output
    y = torch.zeros(4, 3)
    ref = [y, y.clone()]
    assert shared_outputs(ref) == [False, False] and shared_outputs([y, y]) == [False, True]
    assert shared_outputs([y, y[1:]]) == [False, True] and shared_outputs([y, torch.zeros(0)]) == [False, False]
    desc = describe_output((y, y), [], "cpu")
    assert [m["shares"] for m in desc["meta"]] == [None, 0]
    assert [m["shares"] for m in describe_output((y, y.clone()), [], "cpu")["meta"]] == [None, None]
    rules = checks.Outputs(single=False, device="cpu", shared=(False, False))
    assert rules.described(False, desc["meta"], ref, "t").reason is Reason.ALIASING
    assert checks.Outputs(single=False, device="cpu", shared=(False, True)).described(False, desc["meta"], ref,
                                                                                     "t") is None


def test_handed_tensors_are_checked_whatever_the_description_said():
    rules = checks.Outputs(single=True, device="cpu")
    ref = [torch.zeros(4, 3)]
    assert rules.handed([torch.ones(4, 3)], ref, "t") is None
    assert rules.handed([torch.ones(1, 3)], ref, "t").reason is Reason.SHAPE       # would broadcast
    assert rules.handed([torch.ones(4, 3, dtype=torch.float64)], ref, "t").reason is Reason.DTYPE
    assert rules.handed([torch.ones(4, 3)] * 2, ref, "t").check == "output structure"
    assert rules.handed([torch.nn.Parameter(torch.ones(4, 3))], ref, "t").check == "output type"
    assert rules.handed("x", ref, "t").reason is Reason.OUTPUT_TYPE


def _task(lean: bool = False):
    memory = SimpleNamespace(lean=lean, reason="tight")
    return SimpleNamespace(lean=lean, memory=memory, contract=Contract(), hash="h", target="cpu", device="cpu")


def test_one_verdict_builder(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text("x = 1\n")
    s = SimpleNamespace(cand=SimpleNamespace(path=str(cand)), notes=["a note"], checks=[Check("build", True, "ok")])
    v = verdict.rejected(_task(), s, Rejected(Reason.RECHECK, Check("timed-loop re-check", False, "wrong\nmore")))
    assert v.status is Status.REJECTED and v.reason is Reason.RECHECK
    assert v.message == "timed-loop re-check: wrong" and v.checks[-1].name == "timed-loop re-check"
    assert v.candidate_hash and v.workload_hash == "h" and v.notes == ("a note",)
    lean = verdict.build(_task(lean=True), s, Status.ACCEPTED, Reason.OK, "all checks passed")
    assert lean.accepted and any("lean memory plan (tight)" in n for n in lean.notes)
    assert Rejected(Reason.CRASH, Check("build", False, "")).line == "build"


def test_only_outputs_rounded_on_their_way_get_grid_leeway(write):
    """Red team 21: an argmax beside a rounded output of the same reference had the rounded output's
    one-step leeway (7 wrong classes of 8192 accepted). Whether an output is on a grid is its own path's."""
    from kernelgate.oracle import Oracle
    from kernelgate.workload import Spec, load_reference
    src = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.round(x * 16.0).clamp(-128, 127).to(torch.int8), x.argmax(dim=-1)
def get_inputs():
    return [torch.randn(2048, 64)]
def get_init_inputs():
    return []
"""
    ref = load_reference(Spec(write("ref.py", src), "Model"))
    o = Oracle(ref, "cpu", Contract())
    xs = ref.inputs(0)
    q, pred = o.probe(xs)
    assert o.rounded == [True, False]
    comp = checks.Comparator.of(o)
    assert comp.quantized and comp.rounded == (True, False)
    eq, ep = comp.expect(q, q, {}, 0), comp.expect(pred, pred, {"task dtype": pred}, 1)
    bad_q, bad_p = q.clone(), pred.clone()
    bad_q[0] += 1
    bad_p[0] = (bad_p[0] + 1) % 64                      # one class of 2048 wrong: 0.05%
    assert eq.grid is not None and eq.check(bad_q, "q").ok           # the rounded output: one step allowed
    assert ep.grid is None and not ep.check(bad_p, "pred").ok        # the argmax: exact


def test_an_argmax_of_rounded_values_is_judged_exactly(write):
    """Red team 22: the rounding mark passed through every later op, so an argmax of rounded logits (a class,
    not a value on a grid) had one-step leeway. Index and comparison ops clear it on their integer outputs."""
    from kernelgate.oracle import Oracle
    from kernelgate.workload import Spec, load_reference
    src = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        q = torch.round(x * 16.0).clamp(-128, 127).to(torch.int8)
        return q, q.argmax(dim=-1), (q > 0).sum(dim=-1), q.max(dim=-1).values
def get_inputs():
    return [torch.randn(256, 64)]
def get_init_inputs():
    return []
"""
    ref = load_reference(Spec(write("ref.py", src), "Model"))
    o = Oracle(ref, "cpu", Contract())
    o.probe(ref.inputs(0))
    assert o.rounded == [True, False, False, True]



def test_each_problem_of_a_batch_is_judged_on_its_own_spread():
    """gate/session.py `each_problem`: problem 0 of the batch is nearly singular (the reference's runs err 2-2.5x
    its solution: undetermined, left to the whole output's bound), problem 1 ill-conditioned (its runs err 1e-3),
    the other two exact to float32. Zeros in a healthy problem are refused though the whole output's bound lets
    them through; problem 1 within 4x its worst run passes and 10x fails; anything goes in problem 0."""
    torch.manual_seed(0)
    g = torch.randn(4, 8, dtype=torch.float64)

    def run(s0, s1):
        t = g.float()
        t[0] = (g[0] * (1 + s0)).float()
        t[1] = (g[1] * (1 + s1)).float()
        return Runs([g], [t], {"task dtype": [t]})
    runs = run(2.0, 1e-3)
    more = [run(*s) for s in ((2.5, -1e-3), (2.2, 1.2e-3), (2.4, 0.8e-3), (2.1, -1.1e-3))]
    cmp = checks.Comparator()
    b = runs.task[0]
    assert cmp.each_problem(b.clone(), runs, more, 0, "trial").ok
    wild = b.clone()
    wild[0] = (g[0] * -50).float()                               # the undetermined problem: not judged here
    wild[1] = (g[1] * (1 + 4e-3)).float()                        # within 4x the worst run's 1.2e-3
    assert cmp.each_problem(wild, runs, more, 0, "trial").ok
    wild[1] = (g[1] * (1 + 1.2e-2)).float()
    chk = cmp.each_problem(wild, runs, more, 0, "trial")
    assert not chk.ok and "1 of the batch's 4 problems" in chk.detail and "problem 1" in chk.detail
    wiped = b.clone()
    wiped[2] = 0.0
    chk = cmp.each_problem(wiped, runs, more, 0, "trial")
    assert not chk.ok and "1 of the batch's 4 problems" in chk.detail and "problem 2" in chk.detail
    whole = cmp.expect(g, b, {"task dtype": b}).check(wiped, "trial")
    assert whole.ok                                               # the whole output's bound lets it through


def test_a_very_large_batch_is_judged_in_runs_of_neighbouring_problems(monkeypatch):
    """Comparator.each_problem past EACH_MAX problems: runs of neighbours share a bound (the cost stays bounded),
    and a wiped problem still fails its run's."""
    monkeypatch.setattr(checks, "EACH_MAX", 3)
    g = torch.randn(8, 5, dtype=torch.float64)
    t = g.float()
    runs = Runs([g], [t], {"task dtype": [t]})
    more = [Runs([g], [t], {"task dtype": [t]})]
    cmp = checks.Comparator()
    assert cmp.each_problem(t.clone(), runs, more, 0, "trial").ok
    wiped = t.clone()
    wiped[4] = 0.0
    chk = cmp.each_problem(wiped, runs, more, 0, "trial")
    assert not chk.ok and "in runs of 3" in chk.detail and "problems 3-5" in chk.detail


def test_a_batch_is_judged_problem_by_problem_only_where_its_bound_could_hide_a_problem():
    """checks.hides_a_problem: a bound loose everywhere alike (TF32 convolutions permitted: 1e-3 on a 64-image
    batch) never costs the probe and the per-problem runs; a batch's bound set by its singular systems (0.3) does."""
    from kernelgate.gate import correctness
    def tol(fro):
        return correctness.Tolerance(1.0, 1.0, fro, 0.0, 0.0, fro / 2, 2.0 ** -24, False, "task dtype", fro / 2)
    images = [torch.randn(64, 3, 16, 16)]
    assert not checks.hides_a_problem(tol(1e-3), torch.zeros(64, 128, 8, 8), images)
    systems = [torch.randn(64, 8, 12), torch.randn(64, 8)]
    assert checks.hides_a_problem(tol(0.3), torch.zeros(64, 8), systems)
    assert checks.hides_a_problem(tol(0.01), torch.zeros(512), systems)      # flattened: 512 entries, 64 blocks
    assert not checks.hides_a_problem(tol(0.005), torch.zeros(64, 8), systems)
    assert not checks.hides_a_problem(None, torch.zeros(64, 8), systems)
