"""Trials that go where a cheat does not expect: integer ranges, integer buffers, negated parameters,
edits of a trial's inputs (against caches keyed on sampled elements), NaN/Inf inputs."""
import pytest
import torch

from kernelgate import api, workload
from kernelgate.config import GateConfig
from kernelgate.gate import correctness, task as task_mod, trials as trials_mod
from kernelgate.records import Contract

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _task(write, body: str, name: str = "ref.py") -> task_mod.Task:
    return task_mod.prepare(workload.Spec.parse(write(name, HEAD + body), "Model"), "cpu", Contract())


def _trials(task: task_mod.Task, seed: int = 7) -> list[trials_mod.Trial]:
    return trials_mod.make_trials(task, seed, GateConfig().trials)


def _values(trials: list[trials_mod.Trial], i: int) -> set[int]:
    return {v for t in trials for v in t.inputs[i].reshape(-1).tolist()}


def _verify(write, ref: str, cand: str, tmp_path):
    return api.verify(write("ref.py", HEAD + ref), write("cand.py", HEAD + cand), store=str(tmp_path / "s.sqlite"))


EMBEDDING = """
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = nn.Embedding(n, 8)
    def forward(self, idx):
        return self.emb(idx)
def get_inputs():
    return [torch.randint(0, 20, (16, 32))]          # the generator uses a fifth of the table
def get_init_inputs():
    return [100]
"""

CROSS_ENTROPY = """
class Model(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)
def get_inputs():
    return [torch.randn(512, 10), torch.randint(0, 10, (512,))]
def get_init_inputs():
    return []
"""

COLUMNS = """
class Model(nn.Module):
    def forward(self, x, idx):
        return x[:, idx] * 2.0
def get_inputs():
    return [torch.randn(16, 50), torch.randint(0, 50, (64,))]
def get_init_inputs():
    return []
"""


def test_embedding_indices_cover_the_table_and_never_go_negative(write):
    trials = _trials(_task(write, EMBEDDING))
    seen = _values(trials, 0)
    assert 0 in seen and 99 in seen and max(seen) == 99 and min(seen) == 0   # nn.Embedding rejects -1 and 100
    assert any("integer inputs 0 widened" in t.name for t in trials)


def test_cross_entropy_targets_include_the_ignore_index_but_not_other_negatives(write):
    task = _task(write, CROSS_ENTROPY)
    assert task.admission.ok, task.admission.detail          # a 0-dim loss is not degenerate
    seen = _values(_trials(task), 1)
    assert -100 in seen and {0, 9} <= seen and max(seen) == 9
    assert not any(-100 < v < 0 for v in seen)


def test_advanced_indexing_gets_negative_indices(write):
    seen = _values(_trials(_task(write, COLUMNS)), 1)
    assert min(seen) == -50 and max(seen) == 49


@pytest.mark.slow
def test_a_candidate_ignoring_the_ignore_index_is_rejected(write, tmp_path):
    cand = """
class ModelNew(nn.Module):
    def forward(self, logits, target):
        lse = torch.logsumexp(logits, dim=-1)
        return (lse - logits.gather(1, target.clamp(min=0)[:, None])[:, 0]).mean()
"""
    honest = """
class ModelNew(nn.Module):
    def forward(self, logits, target):
        keep = target != -100
        picked = logits.gather(1, torch.where(keep, target, 0)[:, None])[:, 0]
        return ((torch.logsumexp(logits, dim=-1) - picked) * keep).sum() / keep.sum()
"""
    assert _verify(write, CROSS_ENTROPY, honest, tmp_path).status.value == "accepted"
    v = _verify(write, CROSS_ENTROPY, cand, tmp_path)
    assert v.status.value == "rejected" and v.reason.value == "mismatch", v.message


SOFTMAX = """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [torch.randn(64, 128)]
def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_cache_keyed_on_three_sampled_elements_is_rejected(write, tmp_path):
    cheat = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key, self.out = None, None
    def forward(self, x):
        key = (float(x[0, 0]), float(x[17, 3]), float(x[-1, -1]))
        if key != self.key:
            self.key, self.out = key, torch.softmax(x, dim=-1)
        return self.out.clone()
"""
    v = _verify(write, SOFTMAX, cheat, tmp_path)
    assert v.status.value == "rejected" and v.reason.value == "mismatch", v.message
    # which trial catches it first depends on the session's secret seed: an edit trial, or any trial whose three
    # sampled elements happen to equal the cached key's (zeros after a sparse input); the edits' own shape is
    # test_edit_trials_change_a_few_positions_then_one's
    assert v.message.startswith(("edit of", "trial")), v.message


def test_edit_trials_change_a_few_positions_then_one(write):
    trials = _trials(_task(write, SOFTMAX), seed=3)
    k = next(i for i, t in enumerate(trials) if t.name.startswith("edit of trial"))
    before, first, second = trials[k - 1], trials[k], trials[k + 1]
    assert first.state is None and second.state is None          # parameters as in the trial they edit
    assert 2 <= int((before.inputs[0] != first.inputs[0]).sum()) <= 6
    assert int((first.inputs[0] != second.inputs[0]).sum()) == 1


SCALE = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(32) + 0.5)      # strictly positive at init
        self.bias = nn.Parameter(torch.zeros(32))
    def forward(self, x):
        return torch.relu(x * self.scale + self.bias)
def get_inputs():
    return [torch.randn(64, 32)]
def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_positive_parameter_is_negative_in_some_trial(write, tmp_path):
    trials = _trials(_task(write, SCALE))
    assert any(t.state is not None and bool((t.state["scale"] <= 0).all() and (t.state["scale"] < 0).any())
               for t in trials)                    # negated (the far-off trial zeroes some elements too)
    assert any(t.state is not None and bool((t.state["bias"] < 0).any()) for t in trials)
    cheat = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(32))
        self.bias = nn.Parameter(torch.zeros(32))
    def forward(self, x):                                   # bit-identical while the scale is positive
        return torch.relu(x * self.scale.abs() + self.bias)
"""
    v = _verify(write, SCALE, cheat, tmp_path)
    assert v.status.value == "rejected" and v.reason.value == "mismatch", v.message
    assert "negated" in v.message


PERMUTE = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("perm", torch.randperm(64))
        self.register_buffer("shift", torch.tensor(3))
    def forward(self, x):
        return torch.roll(x[:, self.perm], int(self.shift), dims=1)
def get_inputs():
    return [torch.randn(8, 64)]
def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_integer_buffers_are_perturbed_where_the_reference_runs(write, tmp_path):
    task = _task(write, PERMUTE)
    perm0 = task.oracle.state0["perm"]
    trials = _trials(task)
    changed = [t for t in trials if t.state is not None and "integer buffers perturbed" in t.name]
    assert changed
    for t in changed:
        assert not torch.equal(t.state["perm"], perm0) and torch.equal(t.state["perm"].sort().values, torch.arange(64))
        assert int(t.state["shift"]) in (4, 5)
    cheat = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("perm", torch.randperm(64))
        self.register_buffer("shift", torch.tensor(3))
        self.fixed = self.perm.clone()                          # the permutation at construction, frozen
    def forward(self, x):
        return torch.roll(x[:, self.fixed], 3, dims=1)
"""
    v = _verify(write, PERMUTE, cheat, tmp_path)
    assert v.status.value == "rejected" and "integer buffers perturbed" in v.message, v.message


RELU = """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(32, 64)]
def get_init_inputs():
    return []
"""


def _nonfinite_trial(trials):
    return [t for t in trials if correctness.NONFINITE_TRIAL in t.name]


def test_nan_propagating_ops_get_a_nan_inf_trial(write):
    for ref in (RELU, SOFTMAX):
        (t,) = _nonfinite_trial(_trials(_task(write, ref)))
        x = t.inputs[0]
        assert bool(x.isnan().any()) and bool((x == float("inf")).any()) and bool((x == float("-inf")).any())


@pytest.mark.slow
def test_nan_handling_of_honest_kernels_is_not_judged_but_spreading_nan_is(write, tmp_path):
    where = """
class ModelNew(nn.Module):
    def forward(self, x):                                   # NaN -> 0, as fmaxf / Triton's maximum do
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype))
"""
    assert _verify(write, RELU, where, tmp_path).status.value == "accepted"
    spreads = """
class ModelNew(nn.Module):
    def forward(self, x):                                   # a statistic of the whole tensor folded in
        return torch.softmax(x, dim=-1) + 0.0 * x.amax()
"""
    v = _verify(write, SOFTMAX, spreads, tmp_path)
    assert v.status.value == "rejected" and v.reason.value == "nonfinite", v.message
    assert correctness.NONFINITE_TRIAL in v.message


@pytest.mark.slow
def test_extreme_values_reach_exp_overflow(write, tmp_path):
    no_max = """
class ModelNew(nn.Module):
    def forward(self, x):                                   # exp(x) overflows past 88.7
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)
"""
    v = _verify(write, SOFTMAX, no_max, tmp_path)
    # rejected by whichever trial overflows first (the trials' order and draws come from a secret seed; a
    # heavy-tailed trial can overflow too), and every plan has an extreme-values trial past exp's range
    assert v.status.value == "rejected" and v.reason.value == "nonfinite", v.message
    for seed in (1, 7, 123):
        extreme = [t for t in _trials(_task(write, SOFTMAX), seed) if "extreme values" in t.name]
        assert extreme and max(float(t.inputs[0].abs().max()) for t in extreme) > 88.8, seed


@pytest.mark.slow
def test_references_without_a_judgeable_nan_output_get_no_nan_trial(write, tmp_path):
    total = "\nclass Model(nn.Module):\n    def forward(self, x):\n        return x.sum()\n" \
            "def get_inputs():\n    return [torch.randn(32, 64)]\ndef get_init_inputs():\n    return []\n"
    # at +-Inf, the fp32 reference overflows where the fp64 oracle does not
    dtype_bound = total.replace("return x.sum()", "return torch.nan_to_num(x, posinf=1e38, neginf=-1e38) * 10.0")
    garbage = total.replace("return x.sum()", "return torch.where(torch.isnan(x), torch.empty_like(x), x) * 2")
    for ref in (dtype_bound, garbage):
        assert not _nonfinite_trial(_trials(_task(write, ref))), ref
    # a sum is NaN everywhere on NaN inputs: judged so (red team 35, a loss that dropped its non-finite terms)
    assert _nonfinite_trial(_trials(_task(write, total)))
    honest = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.nan_to_num(x, posinf=1e38, neginf=-1e38) * 10.0\n"
    assert _verify(write, dtype_bound, honest, tmp_path).status.value == "accepted"


def test_unjudged_where_nonfinite_keeps_the_rest_judged():
    g = torch.tensor([float("nan"), 1.0, float("inf")], dtype=torch.float64)
    c = torch.tensor([0.0, float("nan"), 5.0])
    out = correctness.unjudged_where_nonfinite(c, g)
    assert out[0].isnan() and out[1].isnan() and out[2] == float("inf")


def test_trials_are_built_one_at_a_time_and_the_plan_is_whole(write, monkeypatch):
    """The judge holds one trial's inputs at a time (a task with gigabytes of inputs held every trial at once):
    the first trial is yielded after one input set was made; iterated to the end, the plan still has the
    given trial first, the edits right after their anchor, and the NaN/Inf and extreme trials."""
    task = _task(write, """
class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return []
""")
    made = []
    real = task_mod.inputs_at
    monkeypatch.setattr(task_mod, "inputs_at", lambda *a, **k: made.append(1) or real(*a, **k))
    it = trials_mod.iter_trials(task, 11, GateConfig().trials)
    first = next(it)
    assert first.name.startswith("trial 1 (given") and len(made) == 1
    names = [first.name] + [t.name for t in it]
    anchor = next(i for i, n in enumerate(names) if n.startswith("edit of trial")) - 1
    assert names[anchor].startswith("trial ") and names[anchor + 2].startswith("edit of the edit")
    assert any("non-finite" in n or "NaN" in n for n in names) and any("extreme values" in n for n in names)
    assert sum(n.startswith("trial ") and "(" in n for n in names) >= GateConfig().trials


SCALED = """
class Model(nn.Module):
    def forward(self, x, alpha, k):
        return x * alpha + k
def get_inputs():
    return [torch.randn(16, 12), 0.5, 3]
def get_init_inputs():
    return []
"""


def test_float_arguments_take_other_values_and_integers_keep_theirs(write):
    """Red team 21: a float argument of forward was the workload's own value in every trial."""
    trials = _trials(_task(write, SCALED))
    alphas = {t.inputs[1] for t in trials}
    assert 0.5 in alphas and len(alphas) >= 4 and any(a < 0 for a in alphas)
    assert {t.inputs[2] for t in trials} == {3}


def _outside_is_poison(x: torch.Tensor) -> bool:
    """Every element of x's storage outside its view (gaps, the part before its offset) is like the view's own
    values, within their magnitude (plausible and wrong for a kernel reading there; no NaN or sentinel to tell a
    trial by), and hardly ever one of them (red team 35 told a trial by finding the view's values outside it). Zeros
    aside: a decoy of a zero is zero (a special-values trial's zeros), and zeros outside a caller's view are common."""
    total = x.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(x.shape, x.stride()))
    inside = torch.zeros(total, dtype=torch.bool)
    inside[torch.arange(total).as_strided(x.shape, x.stride(), x.storage_offset()).reshape(-1)] = True
    outside = x.as_strided((total,), (1,), 0)[~inside]
    nonzero = outside[outside != 0]
    own = torch.isin(nonzero, x.reshape(-1)).float().mean().item() if nonzero.numel() else 0.0
    return bool(torch.isfinite(outside).all()) and bool((outside.abs() <= x.abs().max()).all()) and own < 0.5


def _layout_kind(x: torch.Tensor) -> str:
    rows, cols = x.shape
    if x.is_contiguous():
        return "shifted"
    if x.stride(0) == 1:
        return "column-major" if x.stride(1) == rows else "column-major with gaps"
    if x.stride(1) == 2:
        return "gaps, every second element"
    return "rows with a pitch" if x.stride(1) == 1 and x.stride(0) > cols else "?"


def test_the_layout_trials_give_each_kind_of_layout(write):
    """Red teams 21, 25, 29, 33: every trial's inputs were contiguous; then each layout trial tried one property
    alone (dense column-major at offset 0, row-major gaps of unit inner stride filled with zeros). A 2-dim
    input now gets six, each of a fixed kind, the memory outside the view holding other values of its own:
    column-major at an offset and at 0, row-major with gaps and every second element, rows with a pitch,
    contiguous at an offset, column-major with gaps (none with `layouts = false`); kinds no main trial is left for
    are trials of their own (red team 34); the edits never anchor on them, and the other trials stay contiguous."""
    t = _task(write, SCALED)
    for seed in range(6):
        trials = _trials(t, seed)
        other = [tr.inputs[0] for tr in trials if trials_mod.LAYOUT in tr.name]
        assert sorted(map(_layout_kind, other)) == sorted(["column-major", "column-major", "gaps, every second element",
                                                           "rows with a pitch", "shifted", "column-major with gaps"]), \
            [tr.name for tr in trials]
        assert sorted(x.storage_offset() == 0 for x in other) == [False] * 5 + [True]
        assert all(_outside_is_poison(x) for x in other if x.storage_offset() or not x.is_contiguous())
        assert all(tr.inputs[0].is_contiguous() and not tr.inputs[0].storage_offset()
                   for tr in trials if trials_mod.LAYOUT not in tr.name)
    t.contract = Contract(layouts=False)
    assert not any(trials_mod.LAYOUT in tr.name for tr in _trials(t))


def test_the_gap_trial_has_gaps_in_every_dim_and_an_offset(write):
    """Red teams 25, 27, 33: inputs with gaps in memory, in every dim (not only the last: a pitched-rows kernel),
    every second innermost element (a kernel assuming a unit inner stride), starting past the buffer's first
    element (a kernel ignoring storage_offset)."""
    t = _task(write, SCALED.replace("torch.randn(16, 12)", "torch.randn(4, 6, 16, 12)"))
    gap = [tr.inputs[0] for tr in _trials(t) if trials_mod.LAYOUT in tr.name and tr.inputs[0].stride(-1) == 2]
    assert len(gap) == 1, [tr.name for tr in _trials(t)]
    x = gap[0]
    assert x.storage_offset() >= 1 and x.stride(2) > 2 * x.shape[3] and x.stride(1) > x.shape[2] * x.stride(2) \
        and x.stride(0) > x.shape[1] * x.stride(1) and _outside_is_poison(x)


def test_a_reference_flattening_by_view_gets_gaps_between_outer_entries(write):
    """Red team 27: `.view` refuses column-major, the secret order and gaps everywhere, so no input was ever
    non-contiguous; gaps between the outer entries at an offset, which `.view` over the inner dims takes (in the
    gap trial's place, and as a layout trial of its own: red team 33)."""
    t = _task(write, SCALED.replace("return x * alpha + k", "return x.view(x.shape[0], -1) * alpha + k")
               .replace("torch.randn(16, 12)", "torch.randn(8, 4, 6)"))
    other = [tr for tr in _trials(t) if trials_mod.LAYOUT in tr.name and not tr.inputs[0].is_contiguous()]
    assert len(other) == 2, [tr.name for tr in _trials(t)]
    for tr in other:
        x = tr.inputs[0]
        assert x.storage_offset() > 0 and x.stride()[1:] == (6, 1) and x.stride(0) > 24 and _outside_is_poison(x)


def test_one_trial_has_exact_special_values_where_the_reference_takes_them(write):
    """Red teams 29, 30: no float input ever held an exact 0 (sin(pi x)/(pi x) for sinc was accepted), a -0.0,
    a rounding tie or an integer. One main trial sets every few elements to such values; where the reference
    turns some into NaN/Inf, zeros alone; not even those where it turns 0 into NaN/Inf (a log)."""
    for seed in range(4):
        special = [tr for tr in _trials(_task(write, SCALED), seed) if "exact special values" in tr.name]
        assert len(special) == 1
        x = special[0].inputs[0]
        assert {0.0, 0.5, -1.5, 2.5, 1.0, -2.0, 3.0} <= set(x.reshape(-1).tolist())
        assert bool(torch.signbit(x[x == 0]).any()) and not bool(torch.signbit(x[x == 0]).all())
        assert any(bool((row == 0).all()) for row in x)             # a zero sample: red team 32
    pole = _task(write, SCALED.replace("return x * alpha + k", "return 1.0 / (x - 0.5) * alpha + k"))
    x = next(tr.inputs[0] for tr in _trials(pole) if "exact special values" in tr.name)
    assert int((x == 0).sum()) >= x.numel() // 5 and not bool((x == 0.5).any())
    logs = _task(write, SCALED.replace("return x * alpha + k", "return torch.log(x.abs()) * alpha + k"))
    assert not any("exact special values" in tr.name for tr in _trials(logs))


def test_the_edits_anchor_never_has_the_special_values(write):
    """A content cache bypassed where the first element is 0 (its key divides by it) missed both edits when their
    anchor was the trial with exact special values, and was accepted (1 verify in 40): the anchor is a trial
    without them."""
    t = _task(write, SCALED)
    for seed in range(40):
        names = [tr.name for tr in _trials(t, seed)]
        k = next(i for i, n in enumerate(names) if n.startswith("edit of trial"))
        assert "exact special values" not in names[k - 1], names[k - 1]
        assert any("exact special values" in n for n in names)


def test_one_trial_takes_the_parameters_far_off(write):
    """Red team 31: parameters stayed within about 2x of their initial values and were never 0, so a weight clamp
    at the init scale and NaN at a zero weight were accepted. One trial scales them 4-8x with some exact 0."""
    t = _task(write, SCALE)
    far = [tr for tr in _trials(t) if "parameters far off" in tr.name]
    assert len(far) == 2, [tr.name for tr in _trials(t)]
    big = 2 * float(t.oracle.state0["scale"].abs().max())
    pruned, dense = sorted((tr.state["scale"] for tr in far), key=lambda w: -int((w == 0).sum()))
    assert bool((pruned == 0).any()) and float(pruned.abs().max()) > big
    # and one dense: a clamp skipped wherever a weight is exactly 0 passed the pruned one (red team 44)
    assert not bool((dense == 0).any()) and float(dense.abs().max()) > big


def test_tensors_in_a_container_the_gate_cannot_reach_are_a_task_error(write):
    """Red team 27: a tensor in a container that is not flattened was never varied; such a task is refused with
    what to do instead (dicts with tuple keys are flattened)."""
    from kernelgate.errors import KernelgateError
    body = """
import collections
P = collections.namedtuple("P", "a b")
class Model(nn.Module):
    def forward(self, p):
        return p.a + p.b
def get_inputs():
    return [P(torch.randn(4), torch.randn(4))]
def get_init_inputs():
    return []
"""
    with pytest.raises(KernelgateError, match="input 0 holds tensors inside a P, which the gate cannot vary"):
        _task(write, body)
    keyed = body.replace("p.a + p.b", "p[(0, 'a')] + p[(1, 'b')]").replace(
        "P(torch.randn(4), torch.randn(4))", "{(0, 'a'): torch.randn(4), (1, 'b'): torch.randn(4)}")
    t = _task(write, keyed, "keyed.py")
    assert len(t.given) == 2 and t.shape is not None


def test_a_reference_that_needs_contiguous_inputs_keeps_them(write):
    t = _task(write, SCALED.replace("return x * alpha + k", "return x.view(-1) * alpha + k"))
    trials = _trials(t)
    assert all(tr.inputs[0].is_contiguous() for tr in trials)
    assert any("no other input layout" in tr.name for tr in trials)


def test_floats_inside_a_list_argument_take_other_values(write):
    """Red team 22: a float inside a list argument (`band=[low, high]`) kept the workload's values."""
    t = _task(write, """
class Model(nn.Module):
    def forward(self, x, band):
        return x + torch.clamp(x, *band)
def get_inputs():
    return [torch.randn(16, 12), [-0.5, 0.5]]
def get_init_inputs():
    return []
""")
    bands = {tuple(tr.inputs[1]) for tr in _trials(t)}
    assert (-0.5, 0.5) in bands and len(bands) >= 4
    assert all(isinstance(tr.inputs[1], list) for tr in _trials(t))


def test_small_float_outputs_get_three_times_the_main_trials():
    """One trial of a loss is one sample of its error: a bf16 GEMM under an MSE landed inside the bound in about
    half the single trials and was accepted about 1 run in 100 with 8 (order_bf16_gemm_loss); a float output of
    fewer than 64 elements gets 24. Integer outputs are compared exactly and big outputs carry many samples."""
    from types import SimpleNamespace as NS
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(())]), 8) == 24
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(256, 64), torch.zeros(3)]), 8) == 24
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(64)]), 8) == 8
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(3, dtype=torch.long)]), 8) == 8
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(())]), 0) == 0
    assert trials_mod.main_count(NS(out_meta=[torch.zeros(())]), 4) == 12       # a variant's reduced plan scales too


def test_a_layout_made_on_another_device_comes_home_in_its_strides_and_offset():
    from kernelgate.gate.layouts import relayout, relayout_on
    x = torch.randn(6, 10)
    for which in range(6):
        same = relayout_on(x, which, 5, None)                 # where x lies: relayout itself
        want = relayout(x, which, 5)
        assert (same is None) == (want is None)
        if want is not None:
            assert same.stride() == want.stride() and same.storage_offset() == want.storage_offset()


@pytest.mark.gpu
def test_a_layout_made_on_the_gpu_matches_the_host_layout_and_values():
    from kernelgate.gate.layouts import relayout, relayout_on
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    x = torch.randn(6, 10, 4)
    for which in range(6):
        y, want = relayout_on(x, which, 5, "cuda"), relayout(x, which, 5)
        assert (y is None) == (want is None)
        if want is not None:
            assert y.device.type == "cpu" and torch.equal(y, x)
            assert y.stride() == want.stride() and y.storage_offset() == want.storage_offset()
            assert y.untyped_storage().nbytes() == want.untyped_storage().nbytes()
