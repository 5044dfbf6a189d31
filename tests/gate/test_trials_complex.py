"""Complex inputs, parameters and buffers go through the same trials as float ones (red team 38: the trials chose
inputs with `is_floating_point()`, False for complex, so a complex task had no edit, special-value, NaN/Inf or
extreme-value trial, and complex parameters were never perturbed or negated). Judge-side only: the plans are
built and judged in process (Expected.check, as the session judges a trial), no worker."""
import math

import torch

from kernelgate import workload
from kernelgate.gate import correctness, task as task_mod, trials as trials_mod, values
from kernelgate.records import Contract

HEAD = "import torch\nimport torch.nn as nn\n"

SQUARE = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(64) * 0.5 + 1.0)
    def forward(self, z):
        return z * z * self.scale + z
def get_inputs():
    return [torch.randn(32, 64, dtype=torch.complex64)]
def get_init_inputs():
    return []
"""

GRAM = """
class Model(nn.Module):
    def forward(self, z):
        return torch.abs(z @ z.mH)
def get_inputs():
    return [torch.randn(24, 16, dtype=torch.complex64)]
def get_init_inputs():
    return []
"""

PARAMS = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, dtype=torch.complex64))
        self.register_buffer("b", torch.randn(64, dtype=torch.complex64))
    def forward(self, x):
        return x * self.w + self.b
def get_inputs():
    return [torch.randn(16, 64)]
def get_init_inputs():
    return []
"""


def _task(write, body: str) -> task_mod.Task:
    return task_mod.prepare(workload.Spec.parse(write("ref.py", HEAD + body), "Model"), "cpu", Contract())


def _trials(task: task_mod.Task, seed: int = 7) -> list[trials_mod.Trial]:
    return trials_mod.make_trials(task, seed, 8)


def _named(trials, text: str) -> list[trials_mod.Trial]:
    return [t for t in trials if text in t.name]


def _parts(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x.resolve_conj())


def _judge(task: task_mod.Task, trials, forward) -> list[tuple[str, bool, str]]:
    """Every trial judged as the session judges it: the oracle's runs on the trial's inputs and parameters,
    `forward(xs, state)` as the candidate's output, Expected.check (NaN/Inf trial: nonfinite_inputs)."""
    o, state, out = task.oracle, task.oracle.state0, []
    try:
        for t in trials:
            state = t.state if t.state is not None else state
            o.load(state)
            runs = o.run(t.inputs)
            c = forward(t.inputs, state)
            (e,) = task.comparator.expected(runs)
            chk = e.check(c, t.name, nonfinite_inputs=correctness.NONFINITE_TRIAL in t.name)
            out.append((t.name, chk.ok, chk.detail))
    finally:
        o.load(o.state0)
    return out


def _square(xs, state):
    z = xs[0]
    return z * z * state["scale"] + z


def test_edit_trials_change_complex_inputs(write):
    trials = _trials(_task(write, SQUARE), seed=3)
    k = next(i for i, t in enumerate(trials) if t.name.startswith("edit of trial"))
    before, first, second = trials[k - 1], trials[k], trials[k + 1]
    assert first.state is None and second.state is None and first.inputs[0].is_complex()
    assert 1 <= int((before.inputs[0] != first.inputs[0]).sum()) <= 6
    parts = int((_parts(before.inputs[0]) != _parts(first.inputs[0])).sum())
    assert 2 <= parts <= 6                                      # 2-6 real or imaginary parts moved
    assert int((_parts(first.inputs[0]) != _parts(second.inputs[0])).sum()) == 1


def test_a_cache_keyed_on_sampled_complex_elements_answers_stale(write):
    """Red team 38 (complex_sampled_key_cache): a memo keyed on 8 sampled elements fails the edit trial."""
    task = _task(write, SQUARE)
    memo: dict = {}

    def cached(xs, state):
        z = xs[0].reshape(-1)
        key = tuple(z[torch.linspace(0, z.numel() - 1, 8).long()].tolist()) + tuple(state["scale"][:4].tolist())
        if key not in memo:
            memo[key] = _square(xs, state)
        return memo[key].clone()

    verdicts = _judge(task, _trials(task, seed=5), cached)
    failed = [(n, d) for n, ok, d in verdicts if not ok]
    assert failed and failed[0][0].startswith("edit of"), verdicts
    memo.clear()
    assert all(ok for _, ok, _ in _judge(task, _trials(task, seed=5), _square))


def test_complex_outputs_get_a_nan_inf_trial(write):
    task = _task(write, SQUARE)
    for seed in (1, 7):
        trials = _trials(task, seed)
        (t,) = _named(trials, correctness.NONFINITE_TRIAL)         # judged as a float output's, each part
        p = _parts(t.inputs[0])
        assert int(p.isnan().sum()) == 1 and int((p == math.inf).sum()) == 1 and int((p == -math.inf).sum()) == 1
        assert len(_named(trials, "extreme values")) == 1


def test_nan_spreading_over_a_complex_output_is_nonfinite(write):
    """Red team 38 (complex_nan_spreads): any NaN/Inf input turns the whole output NaN."""
    task = _task(write, SQUARE)
    trials = _trials(task, seed=1)

    def spreads(xs, state):
        y = _square(xs, state)
        return y if bool(torch.isfinite(xs[0]).all()) else torch.full_like(y, complex(math.nan, math.nan))

    verdicts = _judge(task, trials, spreads)
    failed = [(n, d) for n, ok, d in verdicts if not ok]
    assert len(failed) == 1 and correctness.NONFINITE_TRIAL in failed[0][0] and "NaN/Inf" in failed[0][1], verdicts
    assert all(ok for _, ok, _ in _judge(task, trials, _square)), "an honest copy, NaN inputs included"


def test_complex_inputs_with_a_float_output_get_the_nan_inf_trial(write):
    task = _task(write, GRAM)
    trials = _trials(task, seed=2)
    (t,) = _named(trials, correctness.NONFINITE_TRIAL)             # a float output: judged as float ones are
    assert bool(_parts(t.inputs[0]).isnan().any()) and bool(_parts(t.inputs[0]).isinf().any())
    assert _named(trials, "edit of the edit") and _named(trials, "extreme values")

    def spreads(xs, state):
        y = torch.abs(xs[0] @ xs[0].mH)
        return torch.where(torch.isfinite(y).all(), y, torch.full_like(y, math.nan))

    assert any(not ok and "NaN/Inf" in d for _, ok, d in _judge(task, trials, spreads))
    assert all(ok for _, ok, _ in _judge(task, trials, lambda xs, s: torch.abs(xs[0] @ xs[0].mH)))


def test_complex_inputs_get_exact_special_values(write):
    task = _task(write, SQUARE)
    specials = set(values.SPECIALS)
    for seed in range(3):
        (t,) = _named(_trials(task, seed), "exact special values")
        z = t.inputs[0]
        pairs = {(a, b) for a, b in _parts(z).reshape(-1, 2).tolist() if a in specials and b in specials}
        assert len(pairs) >= 16                                     # both parts from the set, in many pairs
        assert any(b == 0 and a not in (0.0,) for a, b in pairs) and any(a == 0 and b != 0 for a, b in pairs)
        assert any(bool((row == 0).all()) for row in z)             # a zero sample


def test_complex_parameters_and_buffers_are_perturbed_and_negated(write):
    task = _task(write, PARAMS)
    w0, b0 = task.oracle.state0["w"], task.oracle.state0["b"]
    trials = _trials(task)
    states = [t.state for t in trials if t.state is not None and t.state is not task.oracle.state0]
    assert states and all(not torch.equal(s["w"], w0) and not torch.equal(s["b"], b0) for s in states)
    assert all(s["w"].is_complex() and bool((s["w"].imag != 0).any()) for s in states)
    negated = _named(trials, "parameter tensors negated")
    assert negated
    def flipped(s: torch.Tensor, w: torch.Tensor) -> float:   # the far-off trial zeroes some elements too
        kept = s != 0
        return float((s.real[kept] * w.real[kept] < 0).float().mean())
    assert any(flipped(t.state[k], w) > 0.9 for t in negated for k, w in (("w", w0), ("b", b0)))
    assert _named(trials, trials_mod.FAR)


def test_float_only_plans_draw_as_before():
    """The complex paths draw nothing for a float task: perturb and on_parts are workload's own there."""
    state = {"w": torch.randn(8, 4), "s": torch.rand(4) + 0.5, "n": torch.tensor(3)}
    a = trials_mod.perturb(state, torch.Generator().manual_seed(4))
    b = workload.perturb(state, torch.Generator().manual_seed(4))
    assert all(torch.equal(a[k], b[k]) for k in state)
    xs = [torch.randn(6, 5), 2]
    ga, gb = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    ya = trials_mod.on_parts(workload.with_nonfinite, xs, ga, Contract())
    yb = workload.with_nonfinite(xs, gb, Contract())
    assert torch.equal(ya[0].nan_to_num(), yb[0].nan_to_num()) and ya[1] == 2
    assert trials_mod.complex_specials(xs, Contract(), __import__("random").Random(0)) == ({}, {})


def test_complex_comparison_takes_nan_as_nan():
    nan, inf = math.nan, math.inf
    b = torch.tensor([complex(1, 2), complex(nan, 0), complex(inf, 1)], dtype=torch.complex64)
    tol = correctness.derive(b, {"task dtype": b}, b.dtype)
    assert not tol.exact
    assert correctness.compare(b.clone(), b, b, tol, "t").ok
    spread = torch.full_like(b, complex(nan, nan))
    chk = correctness.compare(spread, b, b, tol, "t")
    assert not chk.ok and "NaN/Inf" in chk.detail
    off = b.clone()
    off[0] = complex(1, 2.5)
    chk = correctness.compare(off, b, b, tol, "t")
    assert not chk.ok and "NaN/Inf" not in chk.detail


def test_complex_outputs_get_a_tolerance_of_their_parts_precision():
    """An honest candidate computing a complex output on its real and imaginary parts rounds otherwise than complex
    ops: judged bit-exactly it was refused; each part's roundoff is allowed, a wrong part is not."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 32, dtype=torch.complex64, generator=g)
    w = torch.randn(32, generator=g) * 0.5 + 1.0
    exact = (z.to(torch.complex128) ** 2) * w.double() + z.to(torch.complex128)
    ref = z * z * w + z
    tol = correctness.derive(exact, {"task dtype": ref}, ref.dtype)
    assert not tol.exact and tol.u == 2.0 ** -24
    parts = exact.to(torch.complex64)                    # rounded once: another rounding than the reference's
    assert not torch.equal(parts, ref)
    assert correctness.compare(parts, exact, ref, tol, "parts").ok
    wrong = torch.complex(parts.real, parts.imag * (1 + 1e-3))
    assert not correctness.compare(wrong, exact, ref, tol, "wrong").ok
    nan = parts.clone()
    nan[3, 4] = complex(math.nan, 0.0)
    check = correctness.compare(nan, exact, ref, tol, "nan")
    assert not check.ok and "NaN/Inf" in check.detail
