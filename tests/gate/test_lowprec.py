"""Low-precision gate pieces: format facts, the explained tolerance, one-step checks, low-precision mutants."""
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from kernelgate.gate import correctness, lowprec
from kernelgate.oracle import Oracle
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

CORPUS = Path(__file__).resolve().parent.parent / "corpus_lowprec"
E4M3 = torch.float8_e4m3fn


def _load(name, seed=1):
    """Reference, oracle and one trial's runs for a workload of tests/corpus_lowprec."""
    ref = load_reference(Spec(str(CORPUS / f"{name}.py"), "Model"))
    oracle = Oracle(ref, "cpu", Contract())
    xs = ref.inputs(seed)
    oracle.probe(xs)
    return oracle, xs, oracle.run(xs)


def _explain(oracle, xs, runs, **kw):
    g, b = runs.oracle[0], runs.task[0]
    return lowprec.explain(g, {n: r[0] for n, r in runs.permitted.items()}, b.dtype,
                           reduction_length=(oracle.reduce_ks or [0])[0] or None,
                           formats=lowprec.formats_of(oracle.model, xs), **kw)


# ------------------------------------------------------------------ format facts

def test_format_table_and_classify():
    expect = {torch.float64: ("fp64", 2.0 ** -53), torch.float32: ("fp32", 2.0 ** -24),
              torch.float16: ("fp16", 2.0 ** -11), torch.bfloat16: ("bf16", 2.0 ** -8),
              E4M3: ("fp8e4m3", 2.0 ** -4), torch.float8_e5m2: ("fp8e5m2", 2.0 ** -3),
              torch.int8: ("int8", 0.0), torch.uint8: ("uint8", 0.0), torch.int32: ("int32", 0.0),
              torch.int64: ("int64", 0.0), torch.bool: ("bool", 0.0)}
    for dt, (name, u) in expect.items():
        assert lowprec.classify(dt) == name
        assert lowprec.FORMATS[name].u == u
        info = torch.finfo(dt) if dt.is_floating_point else torch.iinfo(dt) if dt != torch.bool else None
        assert lowprec.FORMATS[name].max == (float(info.max) if info else 1.0)
    assert lowprec.FORMATS["tf32"].u == 2.0 ** -11
    for name, u in correctness.FORMAT_U.items():          # agrees with the gate's own table
        assert lowprec.FORMATS[name].u == u
    with pytest.raises(ValueError):
        lowprec.classify(torch.complex64)


# ------------------------------------------------------------------ the explained tolerance

@pytest.mark.parametrize("name", ["bf16_mlp", "bf16_attention"])
def test_derivation_numbers_equal_derive(name):
    oracle, xs, runs = _load(name)
    g, b = runs.oracle[0], runs.task[0]
    refs = {n: r[0] for n, r in runs.permitted.items()}
    tol = correctness.derive(g, refs, b.dtype, reduce_k=(oracle.reduce_ks or [0])[0])
    d = _explain(oracle, xs, runs)
    assert not d.exact and d.reason == "gate.correctness.derive"
    assert (d.allowed_max, d.allowed_mean, d.allowed_fro) == (tol.max_abs, tol.mean_abs, tol.fro_rel)
    assert (d.ref_max, d.ref_mean, d.ref_fro) == (tol.ref_max, tol.ref_mean, tol.ref_fro)
    assert (d.u, d.source) == (tol.u, tol.source)
    assert d.tolerance() == tol
    assert d.runs[0].max == tol.ref_max > 0
    wider = _explain(oracle, xs, runs, factor_max=4.0, factor_mean=3.0, beta=16.0)
    assert wider.allowed_max == pytest.approx(4.0 * tol.ref_max + (16.0 * tol.u + d.order) * d.scale_max)
    assert wider.allowed_fro == pytest.approx(4.0 * tol.ref_fro + 16.0 * tol.u + d.order)


def test_derivation_with_two_permitted_runs_names_the_one_that_set_the_bound():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(32, 300, generator=gen, dtype=torch.float64)
    w = torch.randn(300, 16, generator=gen, dtype=torch.float64)
    g = a @ w
    refs = {"task dtype": a.float() @ w.float(), "bf16 (contract)": (a.bfloat16() @ w.bfloat16()).float()}
    tol = correctness.derive(g, refs, torch.float32, reduce_k=300)
    d = lowprec.explain(g, refs, torch.float32, reduction_length=300)
    assert d.source == tol.source == "bf16 (contract)"
    assert (d.allowed_max, d.allowed_mean, d.allowed_fro) == (tol.max_abs, tol.mean_abs, tol.fro_rel)
    assert "bf16 (contract): max" in d.to_text() and "<- sets the bound" in d.to_text()


def test_integer_outputs_require_exactness():
    oracle, xs, runs = _load("int8_linear_requant")
    b = runs.task[0]
    d = _explain(oracle, xs, runs)
    assert d.exact and d.output_format == "int8" and d.u == 0.0
    assert "bit-identical" in d.to_text() and "integer/bool output" in d.to_text()
    assert lowprec.check_output(b.clone(), runs.oracle[0], b, d).ok
    off = b.clone()
    off[0, 0] = off[0, 0] - 1 if off[0, 0] > -128 else off[0, 0] + 1
    assert not lowprec.check_output(off, runs.oracle[0], b, d).ok
    assert lowprec.across_trials([d])[0].exact
    flag = torch.tensor([True, False])
    assert lowprec.explain(flag, {"task dtype": flag}, torch.bool, reduction_length=None).exact


def test_float_output_with_zero_reference_error_is_exact_only_if_so_on_every_trial():
    x = torch.randn(4, 8, dtype=torch.float64).float()
    g = x.double().t()                                            # pure data movement: exact
    d0 = lowprec.explain(g, {"task dtype": x.t()}, torch.float32, reduction_length=None)
    assert d0.exact and d0.zero_error and "zero error" in d0.to_text()
    assert not lowprec.check_output(x.t() + 2.0 ** -20, g, x.t(), d0).ok
    y = torch.randn(16, 64, dtype=torch.float64)
    d1 = lowprec.explain(y @ y.t(), {"task dtype": y.float() @ y.float().t()}, torch.float32, reduction_length=64)
    assert not d1.exact
    relaxed = lowprec.across_trials([d0, d1])
    assert not relaxed[0].exact and relaxed[0].allowed_max == d0.allowed_max > 0
    assert lowprec.across_trials([d0, d0])[0].exact


def test_to_text_names_formats_reduction_length_error_and_factor():
    oracle, xs, runs = _load("bf16_mlp")
    d = _explain(oracle, xs, runs)
    text = d.to_text()
    assert d.reduction_length == 512
    assert "bf16" in text and "2^-8" in text and "reduction length K = 512" in text
    assert f"max {d.ref_max:.4g}" in text and "relative Frobenius" in text
    assert "factor 2 on max" in text and "1.5 on mean" in text and "beta = 8" in text
    assert f"= {d.allowed_max:.4g}" in text
    data = json.loads(json.dumps(d.to_json()))
    assert data["allowed_max"] == d.allowed_max and data["reduction_length"] == 512
    assert {"role": "output", "format": "bf16", "u": 2.0 ** -8} in data["formats"]



# ------------------------------------------------------------------ steps on a quantization grid

def test_step_counts_int8():
    ref = torch.tensor([0, 1, -3, 127, 5], dtype=torch.int8)
    c = torch.tensor([0, 2, -1, -128, 4], dtype=torch.int8)
    s = lowprec.quant_steps(c, ref)
    assert (s.total, s.equal, s.one, s.two_plus, s.max_steps) == (5, 1, 2, 2, 255)
    ok, msg = lowprec.check_requant(c, ref, 0.5)
    assert not ok and "2 two or more" in msg


def test_step_counts_fp8():
    tiny = 2.0 ** -9                                              # smallest e4m3 subnormal
    ref = torch.tensor([1.0, 1.0, 448.0, 0.0, tiny, 3.0, -2.0], dtype=torch.float64).to(E4M3)
    c = torch.tensor([1.125, 1.25, 416.0, -0.0, -tiny, float("nan"), -2.0], dtype=torch.float64).to(E4M3)
    s = lowprec.quant_steps(c, ref)
    # equal: 0 vs -0, -2 vs -2; one step: 1 -> 1.125, 448 -> 416; two or more: 1 -> 1.25, +tiny -> -tiny, NaN
    assert (s.equal, s.one, s.two_plus) == (2, 2, 3)
    both_nan = torch.tensor([float("nan")]).to(E4M3)
    assert lowprec.quant_steps(both_nan, both_nan).equal == 1
    assert lowprec.quant_steps(torch.tensor([57344.0]).to(torch.float8_e5m2),
                               torch.tensor([1e6]).to(torch.float8_e5m2)).two_plus == 1   # finite vs inf


def test_step_counts_on_a_scale_grid():
    ref = torch.tensor([1.0, 1.0, 1.0, 1.0])
    s = lowprec.quant_steps(torch.tensor([1.0, 1.5, 2.5, 1.2]), ref, scale=0.5)
    assert (s.equal, s.one, s.two_plus, s.off_grid) == (1, 1, 2, 1)       # 1.2 is off the grid
    assert lowprec.quant_steps(torch.tensor([0.75]), torch.tensor([0.25]), scale=0.5, zero_point=0.5).off_grid == 0
    assert not lowprec.check_requant(torch.tensor([1.0, 1.2]), torch.tensor([1.0, 1.0]), 1.0, scale=0.5)[0]


# ------------------------------------------------------------------ budget and mutants on the quantizing workloads

def _model(name, seed=1):
    oracle, xs, _ = _load(name, seed)
    return oracle.model, xs


def test_one_step_budget_is_positive_and_small_for_int8_linear():
    model, xs = _model("int8_linear_requant")
    b = lowprec.measure_one_step(model, xs, trials=8)
    assert b.two_plus == 0                                       # a ~u perturbation never moves two steps
    assert 0 < b.budget <= 0.01
    assert b.budget == max(lowprec.SAFETY * max(b.fractions), lowprec.FLOOR)
    assert lowprec.one_step_budget(model, xs, trials=2) > 0
    louder = lowprec.measure_one_step(model, xs, trials=4, magnitude=4096.0)
    assert max(louder.fractions) > max(b.fractions)             # the measurement does see boundary crossings


def _int8_alternative(m, x):
    """Honest int8 kernel written differently: one combined multiplier, fp64 epilogue."""
    acc = torch.mm(x.to(torch.int32), m.w_q.to(torch.int32).t()) + m.bias
    mult = (m.s_x.double() * m.s_w.double()) / m.s_out.double()
    return torch.round(acc.double() * mult).clamp(-128, 127).to(torch.int8)


def _fp8_alternative(m, x):
    """Honest fp8 kernel written differently: split-K accumulation in reverse order, one combined multiplier."""
    xq = torch.clamp(x / m.s_x, -448, 448).to(E4M3).float()
    w = m.w_q.float()
    acc = sum(xq[:, k:k + 32] @ w[:, k:k + 32].t() for k in reversed(range(0, w.shape[1], 32)))
    return torch.clamp(acc * (m.s_x * m.s_w / m.s_out), -448, 448).to(E4M3)


@pytest.mark.parametrize("name,alternative", [("int8_linear_requant", _int8_alternative),
                                              ("fp8_scaled_matmul", _fp8_alternative)])
def test_mutants_rejected_and_honest_variants_accepted(name, alternative):
    model, xs = _model(name)
    budget = lowprec.one_step_budget(model, xs)
    with torch.no_grad():
        ref = model(*xs)
        alt = alternative(model, *xs)
    for honest in (lowprec.honest_variant(model, xs), alt):
        ok, msg = lowprec.check_requant(honest, ref, budget)
        assert ok, msg
    mutants = lowprec.lowprec_mutants(model, xs)
    assert set(mutants) == {"lower format", "dropped scale", "truncation", "no saturation"}
    for mutant, out in mutants.items():
        assert out.dtype == ref.dtype and out.shape == ref.shape
        ok, msg = lowprec.check_requant(out, ref, budget)
        assert not ok, f"{mutant} passed: {msg}"
    assert not lowprec.check_requant(ref.to(torch.int32) if name.startswith("int8") else ref.float(), ref, budget)[0]


def test_no_saturation_mutant_overflows_instead_of_saturating():
    model, xs = _model("fp8_scaled_matmul")
    with torch.no_grad():
        ref = model(*xs).float()
    out = lowprec.lowprec_mutants(model, xs)["no saturation"].float()
    assert bool(torch.isnan(out).any()) and not bool(torch.isnan(ref).any())
    assert int((ref.abs() == 448).sum()) >= int(torch.isnan(out).sum()) > 0


# ------------------------------------------------------------------ bf16 workloads through the gate's tolerance

def _scaled_fp8(t):
    """Round through e4m3 with a per-tensor amax scale (the careful way to compute in fp8)."""
    s = t.abs().max().clamp_min(1e-12) / 448.0
    return (t / s).to(E4M3).float() * s


def _mlp(m, x, q):
    h = F.gelu(F.linear(q(x.float()), q(m.fc1.weight.float()), m.fc1.bias.float()))
    return F.linear(q(h), q(m.fc2.weight.float()), m.fc2.bias.float()).bfloat16()


def _attention(m, qq, kk, vv, q):
    s = q(qq.float()) @ q(kk.float()).transpose(-2, -1) / math.sqrt(qq.shape[-1])
    return (q(torch.softmax(s, dim=-1)) @ q(vv.float())).bfloat16()


@pytest.mark.parametrize("name,candidate", [("bf16_mlp", _mlp), ("bf16_attention", _attention)])
@pytest.mark.parametrize("seed", [1, 2])
def test_bf16_fp32_compute_passes_and_fp8_compute_fails(name, candidate, seed):
    oracle, xs, runs = _load(name, seed)
    g, b = runs.oracle[0], runs.task[0]
    d = _explain(oracle, xs, runs)
    assert d.output_format == "bf16" and not d.exact
    with torch.no_grad():
        fp32 = candidate(oracle.model, *xs, lambda t: t)
        fp8 = candidate(oracle.model, *xs, _scaled_fp8)
    assert lowprec.check_output(fp32, g, b, d).ok
    chk = lowprec.check_output(fp8, g, b, d)
    assert not chk.ok and "error too large" in chk.detail
