"""The tolerance's summation-order term (gate/correctness.py order_term): honest reorderings of a long reduction
pass, lower precision still fails; the oracle records the reference's longest reduction."""
import pytest
import torch

from kernelgate import api, oracle as oracle_mod
from kernelgate.gate import correctness
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

MEAN = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=1)
def get_inputs():
    return [torch.rand(4, 4096, 512)]
def get_init_inputs():
    return []
"""
COMPILED = """
import torch
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.compile(lambda x: torch.mean(x, dim=1))
    def forward(self, x):
        return self.f(x)
"""
TF32_INPUTS = """
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        bits = x.contiguous().view(torch.int32) & ~0x1FFF      # inputs rounded to TF32's 10-bit mantissa
        return torch.mean(bits.view(torch.float32), dim=1)
"""


@pytest.mark.slow
def test_torch_compile_of_a_long_mean_is_accepted_and_tf32_inputs_are_not(write, tmp_path):
    """torch.compile's mean over 4096 values erred 1.5e-6 against 4.7e-7 allowed before the order term (the
    reference's pairwise sum errs less than any other order need); rounding the inputs to TF32 errs 40x more
    than the widened bound allows."""
    ref = write("ref.py", MEAN)
    v = api.verify(ref, write("cand.py", COMPILED), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    bad = api.verify(ref, write("tf32.py", TF32_INPUTS), store=str(tmp_path / "s.sqlite"))
    assert not bad.accepted and bad.reason.value == "mismatch", bad.message


def test_order_term_grows_with_the_reduction_and_is_capped():
    u = 2.0 ** -24
    assert correctness.order_term(u, None) == correctness.order_term(u, 1) == 0.0
    assert correctness.order_term(u, 256) == pytest.approx(2 * 16 * u)
    assert correctness.order_term(u, 4096) == pytest.approx(2 * 32 * u)              # capped at sqrt(K) = 32
    assert correctness.order_term(u, 1 << 40) == pytest.approx(2 * 32 * u)           # capped
    assert correctness.order_term(2.0 ** -8, 256) == pytest.approx(2 * 16 * u)       # bf16 output: fp32 accumulator
    g = torch.full((10,), 0.5, dtype=torch.float64)
    plain = correctness.derive(g, {"task dtype": g.float()}, torch.float32)
    wide = correctness.derive(g, {"task dtype": g.float()}, torch.float32, reduce_k=4096)
    assert wide.max_abs == pytest.approx(plain.max_abs + 2 * 32 * u * 0.5)
    assert wide.fro_rel == pytest.approx(plain.fro_rel + 2 * 32 * u)


@pytest.mark.parametrize("body, k", [
    ("return torch.mean(x, dim=1)", 32),
    ("return torch.softmax(x, dim=-1)", 24),
    ("return torch.nn.functional.layer_norm(x, (24,))", 24),
    ("return torch.nn.functional.mse_loss(x, torch.zeros_like(x))", 4 * 32 * 24),
    ("return x @ x.transpose(-1, -2)", 24),
    ("return torch.relu(x)", 0),
    ("return torch.nn.functional.instance_norm(x.unsqueeze(0))", 32 * 24),  # statistics per channel
    ("return torch.nn.functional.cross_entropy(x[0], torch.zeros(32, dtype=torch.long))", 32),  # NLL: a term per sample
])
def test_the_oracle_records_the_longest_reduction(write, body, k):
    src = f"""
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        {body}
def get_inputs():
    return [torch.randn(4, 32, 24)]
def get_init_inputs():
    return []
"""
    ref = load_reference(Spec(write("ref.py", src), "Model"))
    o = oracle_mod.Oracle(ref, "cpu", Contract())
    o.probe(ref.inputs(0))
    assert o.reduce_ks == [k]


def test_each_output_widens_with_its_own_reductions(write):
    """A long loss beside another output widens the loss's bound only: the other output's path has no
    reduction (a candidate must not get an approximate GELU past the gate because a loss sits beside it)."""
    src = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.nn.functional.gelu(x)
        return y, torch.nn.functional.mse_loss(y, torch.zeros_like(y)), torch.softmax(y, dim=-1) * 2
def get_inputs():
    return [torch.randn(4, 32, 24)]
def get_init_inputs():
    return []
"""
    ref = load_reference(Spec(write("ref.py", src), "Model"))
    o = oracle_mod.Oracle(ref, "cpu", Contract())
    o.probe(ref.inputs(0))
    assert o.reduce_ks == [0, 4 * 32 * 24, 24]


def test_a_convolutions_reduction_counts_its_window_and_channels():
    w = torch.randn(8, 3, 5, 5)
    args = (torch.randn(1, 3, 9, 9), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert oracle_mod.reduction_k("convolution", args, None) == 3 * 25
    wt = torch.randn(6, 4, 3, 3)                    # transposed, 2 groups: (in 6 / 2) * 3 * 3
    args = (torch.randn(1, 6, 5, 5), wt, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 2)
    assert oracle_mod.reduction_k("convolution", args, None) == 3 * 9
