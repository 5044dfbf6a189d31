"""bf16 MLP block (GPT-2 style): Linear(4096 -> 16384) -> GELU(tanh) -> Linear(16384 -> 4096), all bf16.

x: [8192, 4096] bf16. Two GEMMs of 2 * 8192 * 4096 * 16384 = 1.1 TFLOP each -> ~3.5 ms on an H200 at
~650 TFLOP/s bf16, plus one GELU pass over the [8192, 16384] hidden activations (0.5 GB). The tanh
approximation is the GELU of GPT-2/Gemma; it is also what cuBLASLt's GELU epilogue computes, so the
bias+GELU can be fused into the first GEMM (precision:bf16-linear-act) without changing the function.
KG_SUITE_SCALE scales the token count and both widths by its cube root (multiples of 16).
"""
import os

import torch
import torch.nn as nn

TOKENS, D, HIDDEN = 8192, 4096, 16384


def _scaled(n: int) -> int:
    return max(16, int(round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** (1 / 3) / 16)) * 16)


class Model(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, d)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def get_inputs():
    return [torch.randn(_scaled(TOKENS), _scaled(D), dtype=torch.bfloat16)]


def get_init_inputs():
    return [_scaled(D), _scaled(HIDDEN)]
