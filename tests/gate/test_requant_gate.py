"""Quantized outputs through the whole gate: bit equality where the reference is exact, grid steps
where its own rounding already differs from the oracle's."""
from pathlib import Path

import pytest

from kernelgate import api

INT8_REF = str(Path(__file__).resolve().parent.parent / "corpus_lowprec" / "int8_linear_requant.py")

INT8_CAND = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.register_buffer("w_q", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("bias", torch.zeros(out_features, dtype=torch.int32))
        self.register_buffer("s_x", torch.tensor(0.0))
        self.register_buffer("s_w", torch.zeros(out_features))
        self.register_buffer("s_out", torch.tensor(0.0))

    def forward(self, x_q):
        acc = x_q.to(torch.int32) @ self.w_q.to(torch.int32).t() + self.bias
        y = acc.double() * (self.s_x.double() * self.s_w.double() / self.s_out.double())
        return torch.clamp(ROUND(y), -128, 127).to(torch.int8)
'''

# A float result rounded onto an int16 grid: the fp32 reference and its fp64 oracle can round differently
# near .5 boundaries, so the gate counts grid steps instead of demanding bit equality.
HALF_REF = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, q):
        y = (q * 0.1) * 5.0
        return torch.round(y).to(torch.int16)


def get_inputs():
    return [torch.randint(-1000, 1000, (4096,)).float()]


def get_init_inputs():
    return []
'''
HALF_CAND = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, q):
        return ROUND(EXPR).to(torch.int16)
'''


@pytest.mark.slow
@pytest.mark.parametrize("rounding, expect", [("torch.round", "accepted"), ("torch.trunc", "rejected")])
def test_int8_requantization_exact_reference(write, rounding, expect):
    v = api.verify(INT8_REF, write("cand.py", INT8_CAND.replace("ROUND", rounding)))
    assert v.status.value == expect, v.message
    assert expect == "accepted" or v.reason.value == "mismatch"


@pytest.mark.slow
@pytest.mark.parametrize("rounding, expr, expect", [
    ("torch.round", "q.double() * 0.5", "accepted"),                  # the oracle's grid exactly
    ("torch.round", "(q * 0.1) * 5.0", "accepted"),                   # the reference's own rounding
    ("torch.trunc", "q.double() * 0.5", "rejected"),                  # many outputs one step off
    ("torch.round", "q.double() * 0.5 + 2.0", "rejected"),            # two steps everywhere
])
def test_steps_on_a_rounding_reference(write, rounding, expr, expect):
    cand = HALF_CAND.replace("ROUND", rounding).replace("EXPR", expr)
    v = api.verify(write("ref.py", HALF_REF), write("cand.py", cand))
    assert v.status.value == expect, v.message
    # the first judged call: trial 1, or the build phase's first call (judged after the lockdown) where it failed
    trial = next(c for c in v.checks if c.name.startswith(("trial 1", "first call")))
    assert "quantized output" in trial.detail


@pytest.mark.slow
@pytest.mark.parametrize("one_step, rounding, expr, expect", [
    (0.6, "torch.trunc", "q.double() * 0.5", "accepted"),       # a contract allowing many one-step differences
    (0.0, "torch.round", "(q.double() * 0.1) * 5.0", "accepted"),  # none allowed: the oracle's computation
    (0.0, "torch.round", "q.double() * 0.5", "rejected"),       # exact grid, but 6.6% one step off the oracle
])
def test_contract_sets_the_one_step_share(write, one_step, rounding, expr, expect):
    from kernelgate.records import Contract
    cand = HALF_CAND.replace("ROUND", rounding).replace("EXPR", expr)
    v = api.verify(write("ref.py", HALF_REF), write("cand.py", cand), contract=Contract(one_step=one_step))
    assert v.status.value == expect, v.message
    assert any("grid step off" in a for a in v.assumptions)


def test_contract_one_step_is_validated():
    from kernelgate.contract import parse
    from kernelgate.errors import KernelgateError
    assert parse({"one_step": 0.002}).one_step == 0.002
    for bad in (1.5, -0.1, "lots"):
        with pytest.raises(KernelgateError):
            parse({"one_step": bad})
