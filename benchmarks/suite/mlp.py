"""Small MLP: Linear 1024 -> 2048, GELU, Linear 2048 -> 2048, GELU, Linear 2048 -> 1024, fp32.

x: [16384, 1024]. GEMMs: 2*16384*(1024*2048 + 2048*2048 + 2048*1024) = 275 GFLOP -> ~5.5 ms on an
H200 at 50 TFLOP/s; two GELUs over [16384, 2048] (134 MB) plus GEMM operands: ~1.1 GB -> ~0.28 ms.
Eager ~5.8 ms. KG_SUITE_SCALE scales the tokens.
"""
import os

import torch
import torch.nn as nn

TOKENS, D_IN, HIDDEN = 16384, 1024, 2048


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


class Model(nn.Module):
    def __init__(self, d_in: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_in)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def get_inputs():
    return [torch.randn(_scaled(TOKENS, 8), D_IN)]


def get_init_inputs():
    return [D_IN, HIDDEN]
