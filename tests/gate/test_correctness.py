import dataclasses
import pytest
import math

import torch

from kernelgate.gate import correctness


def _runs(n=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(64, n, generator=g, dtype=torch.float64)
    w = torch.randn(n, 32, generator=g, dtype=torch.float64)
    oracle = a @ w
    task = (a.float() @ w.float())
    return a, w, oracle, task


def test_fp32_matmul_accepts_other_summation_order_and_rejects_bf16():
    a, w, g, b = _runs()
    tol = correctness.derive(g, {"task dtype": b}, torch.float32)
    chunked = sum(a[:, k:k + 100].float() @ w[k:k + 100].float() for k in range(0, 1000, 100))
    assert correctness.compare(chunked, g, b, tol, "t").ok
    bf16 = (a.bfloat16() @ w.bfloat16()).float()
    chk = correctness.compare(bf16, g, b, tol, "t")
    assert not chk.ok and "error too large" in chk.detail


def test_tolerance_has_floor_for_exact_ops():
    x = torch.randn(100, dtype=torch.float64)
    g = torch.relu(x)
    b = torch.relu(x.float())
    tol = correctness.derive(g, {"task dtype": b}, torch.float32)
    assert tol.max_abs > 0          # floor from unit roundoff even though the reference is exact
    assert tol.max_abs < 1e-5
    assert not correctness.compare(torch.zeros_like(b), g, b, tol, "t").ok


def test_nan_positions_must_match_and_nan_is_no_wildcard():
    g = torch.tensor([1.0, float("nan"), 3.0], dtype=torch.float64)
    b = g.float()
    tol = correctness.derive(g, {"task dtype": b}, torch.float32)
    assert correctness.compare(b.clone(), g, b, tol, "t").ok
    assert not correctness.compare(torch.tensor([1.0, 2.0, 3.0]), g, b, tol, "t").ok      # NaN dropped
    assert not correctness.compare(torch.tensor([float("nan")] * 3), g, b, tol, "t").ok   # NaN everywhere


def test_overflow_of_the_task_dtype_is_tolerated_only_where_the_reference_overflows():
    g = torch.tensor([1e39, 1.0], dtype=torch.float64)
    b = g.float()                                   # inf, 1.0
    tol = correctness.derive(g, {"task dtype": b}, torch.float32)
    assert correctness.compare(b.clone(), g, b, tol, "t").ok
    assert not correctness.compare(torch.tensor([math.inf, math.inf]), g, b, tol, "t").ok


def test_integer_outputs_are_exact():
    g = torch.tensor([1, 2, 3])
    tol = correctness.derive(g, {"task dtype": g}, torch.int64)
    assert tol.exact
    assert correctness.compare(g.clone(), g, g, tol, "t").ok
    assert not correctness.compare(torch.tensor([1, 2, 4]), g, g, tol, "t").ok


def test_unit_roundoff_table():
    assert correctness.unit_roundoff(torch.float32) == 2.0 ** -24
    assert correctness.unit_roundoff(torch.bfloat16) == 2.0 ** -8
    assert correctness.unit_roundoff(torch.int32) == 0.0
    assert correctness.unit_roundoff(torch.float8_e4m3fn) == 2.0 ** -4
    assert correctness.unit_roundoff(torch.float8_e5m2) == 2.0 ** -3


def _verify_layout(write, tmp_path, ref: str, cand: str):
    from kernelgate import api
    head = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    return api.verify(write("ref.py", head + ref), write("cand.py", head + cand), store=str(tmp_path / "s.sqlite"))


@pytest.mark.slow
def test_contiguous_output_where_the_reference_returns_a_transposed_view(write, tmp_path):
    ref = """
class Model(nn.Module):
    def forward(self, x):
        return (x * 2.0).t()
def get_inputs():
    return [torch.randn(48, 32)]
def get_init_inputs():
    return []
"""
    cand = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return (x.t() * 2.0).contiguous()\n"
    v = _verify_layout(write, tmp_path, ref, cand)
    assert v.status.value == "accepted", v.message


CAUSAL = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=2)
    def forward(self, x):
        return self.conv(x)[..., :-2]                   # causal: a slice, pitch 102
def get_inputs():
    return [torch.randn(2, 4, 100)]
def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_padded_computation_returning_the_valid_slice(write, tmp_path):
    cand = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=2)
    def forward(self, x):                               # computed into a buffer of pitch 128
        y = F.conv1d(F.pad(x, (2, 28)), self.conv.weight, self.conv.bias)
        return y[..., :x.shape[-1]]
"""
    v = _verify_layout(write, tmp_path, CAUSAL, cand)
    assert v.status.value == "accepted", v.message
    column_major = cand.replace("return y[..., :x.shape[-1]]", "return y[..., :x.shape[-1]].transpose(1, 2).contiguous().transpose(1, 2)")
    v = _verify_layout(write, tmp_path, CAUSAL, column_major)
    assert v.status.value == "rejected" and v.reason.value == "stride", v.message


def test_chunked_comparison_matches_the_whole_tensor_one(monkeypatch):
    """Large outputs are compared a slice at a time (correctness.CHUNK), with no full-size fp64 temporaries, on
    another device when asked (`compute`, the lean plan's GPU; here the host itself):
    the same statistics and the same verdicts as the whole-tensor computation, NaN/Inf included."""
    import torch
    from kernelgate.gate import correctness as cm
    g = torch.Generator().manual_seed(3)
    oracle = torch.randn(50, 997, generator=g, dtype=torch.float64)
    task = oracle.float()
    cand = (oracle + 1e-7 * torch.randn(50, 997, generator=g, dtype=torch.float64)).float()
    odd = cand.clone()
    odd[3, 5], odd[40, 0] = float("nan"), float("inf")
    specials = oracle.clone()
    specials[7, 7], specials[9, 1] = float("nan"), float("-inf")
    cases = [(cand, oracle, task), (odd, oracle, task), (cand, specials, task),
             (torch.where(specials.isfinite(), cand.double(), specials).float(), specials, task),
             (cand.t().contiguous().t(), oracle, task)]
    whole = []
    for c, o, b in cases:
        tol = cm.derive(o, {"task dtype": b}, torch.float32)
        whole.append((cm.error_stats(c, o), cm.finite_abs_stats(o), cm.mean_nonfinite_as_zero(o),
                      cm.compare(c, o, b, tol, "x").ok, cm.compare(c, o, b, tol, "x").detail, tol.max_abs))
    monkeypatch.setattr(cm, "CHUNK", 1000)
    monkeypatch.setattr(cm, "CHUNK_DEVICE", 1000)
    for (c, o, b), w in zip(cases, whole):
        tol = cm.derive(o, {"task dtype": b}, torch.float32)
        got = (cm.error_stats(c, o), cm.finite_abs_stats(o), cm.mean_nonfinite_as_zero(o),
               cm.compare(c, o, b, tol, "x").ok, cm.compare(c, o, b, tol, "x").detail, tol.max_abs)
        assert got[3] == w[3] and got[4].split(":")[0] == w[4].split(":")[0]
        assert cm.compare(c, o, b, tol, "x", compute="cpu").ok == w[3]
        assert cm.error_stats(c, o, compute="cpu") == pytest.approx(got[0], rel=1e-12)
        for x, y in zip([*got[0], *got[1], got[2], got[5]], [*w[0], *w[1], w[2], w[5]]):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-300), (got, w)
    assert not whole[1][3] and "NaN/Inf" in whole[1][4]


@pytest.mark.parametrize("shape,step", [((37, 11, 5), 64), ((3, 400), 64), ((2, 3, 50), 7), ((1000,), 64)])
def test_slices_of_other_layouts_follow_row_major_order_block_by_block(shape, step, monkeypatch):
    """Outputs in another memory layout (the layout trials') are compared block by block, each block copied on
    its own: the same elements in the same order as the contiguous tensor's slices, no block over `step`
    elements (or one innermost row) - flattening the whole tensor would copy it whole (12 GiB more on the
    device for an fp64 oracle of a 6 GiB output, measured on the H200)."""
    from kernelgate.gate import correctness as corr
    monkeypatch.setattr(corr, "CHUNK", step)
    x = torch.randn(*shape, dtype=torch.float64)
    odd = x.t() if x.dim() == 2 else x.permute(*reversed(range(x.dim()))) if x.dim() > 2 else x[::1]
    other = odd.contiguous()
    if x.dim() >= 2:
        assert not odd.is_contiguous()
    got = list(corr._slices(odd, other))
    flat = [torch.cat([a for a, _ in got]) if got else torch.empty(0), torch.cat([b for _, b in got]) if got else torch.empty(0)]
    assert torch.equal(flat[0], other.reshape(-1)) and torch.equal(flat[1], other.reshape(-1))
    row = odd.shape[-1] if odd.dim() else 1
    assert all(a.numel() <= max(step, row) for a, _ in got)


def test_narrow_outputs_keep_the_mean_and_frobenius_within_a_unit_of_the_reference():
    """bf16 outputs rounded to 4 mantissa bits (red team 38) stayed under 8 units of the mean; honest ones round
    to bf16 once or twice."""
    from kernelgate.gate import correctness
    g = torch.Generator().manual_seed(3)
    G = torch.randn(64, 256, generator=g, dtype=torch.float64)
    ref = G.to(torch.bfloat16)
    tol = correctness.derive(G, {"task dtype": ref}, torch.bfloat16)
    u = 2.0 ** -8

    def mantissa(t, bits):
        m, e = torch.frexp(t)
        return torch.ldexp(torch.round(m * 2 ** bits) / 2 ** bits, e)

    def stats(c):
        d = (c.double() - G).abs()
        return float(d.mean()), float(d.norm() / G.norm())
    honest = (G + G * u * 0.9).to(torch.bfloat16)                 # another rounding on the way
    mean, fro = stats(honest)
    assert mean <= tol.mean_abs and fro <= tol.fro_rel
    mean, fro = stats(mantissa(G, 5).to(torch.bfloat16))        # 4 bits after the leading one
    assert mean > tol.mean_abs and fro > tol.fro_rel
    wide = correctness.derive(G, {"task dtype": G.float()}, torch.float32)
    assert wide.fro_rel >= correctness.BETA * 2.0 ** -24          # fp32 outputs keep beta 8


def test_the_spread_of_an_ill_conditioned_trial_is_capped_by_the_references_own_run():
    """correctness.spread: the worst of the reference's runs, SPREAD_FACTOR on it, but never more than SPREAD_CAP
    times its one run's error (a moved run made far worse conditioned by the move, red team 68's ridge fit, must
    not open the bound), and the floors kept."""
    from kernelgate.gate import correctness as c
    tol = c.Tolerance(2e-3 + 1e-6, 1.5e-4 + 1e-7, 2e-4 + 5e-7, 1e-3, 1e-4, 1e-4, 2.0 ** -24, False, "task dtype", 1e-4)
    wide = c.spread(tol, [(5e-3, 2e-4, 3e-4), (1.0, 1.0, 1.0)])
    assert (wide.ref_max, wide.ref_mean, wide.ref_fro) == (c.SPREAD_CAP * 1e-3, c.SPREAD_CAP * 1e-4, c.SPREAD_CAP * 1e-4)
    assert abs(wide.max_abs - (1e-6 + c.SPREAD_FACTOR * c.SPREAD_CAP * 1e-3)) < 1e-12
    mild = c.spread(tol, [(3e-3, 2e-4, 3e-4)])
    assert abs(mild.fro_rel - (5e-7 + c.SPREAD_FACTOR * 3e-4)) < 1e-12 and mild.own_fro == tol.own_fro
    lost = c.spread(dataclasses.replace(tol, ref_fro=0.1), [(3e-3, 2e-4, 0.5)])   # its runs err 1/16 or more
    assert lost.ref_fro == 0.5 and abs(lost.fro_rel - (5e-7 - 2 * 0.1 + 2e-4 + c.UNDETERMINED_FACTOR * 0.5)) < 1e-9
    assert "undetermined" in lost.source and "undetermined" not in mild.source
    moving = c.spread(tol, [(3e-3, 2e-4, 3e-4)], sensitivity=0.2)        # the exact output moves 1/5 per ulp
    assert abs(moving.fro_rel - (5e-7 + c.UNDETERMINED_FACTOR * 3e-4)) < 1e-12 and "undetermined" in moving.source
