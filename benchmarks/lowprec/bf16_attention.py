"""bf16 attention written out: softmax(q @ k^T / sqrt(d)) @ v, every tensor in bf16.

q, k, v: [8, 16, 2048, 128] bf16 (B, H, S, D). Two batched GEMMs of 2 * 8*16 * 2048^2 * 128 = 137 GFLOP each
(~0.4 ms at bf16 rates); the [8, 16, 2048, 2048] bf16 score matrix (1.07 GB) is written, scaled, softmaxed
and read again: ~5 passes, ~1.2 ms. The library's sdpa rewrite turns it into flash attention.
KG_SUITE_SCALE scales batch and sequence by its square root.
"""
import math
import os

import torch
import torch.nn as nn

BATCH, HEADS, SEQ, DIM = 8, 16, 2048, 128


def _scaled(n: int, lo: int, power: float) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** power))


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return torch.softmax(s, dim=-1) @ v


def get_inputs():
    b, s = _scaled(BATCH, 1, 0.5), _scaled(SEQ, 16, 0.5)
    return [torch.randn(b, HEADS, s, DIM, dtype=torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return []
