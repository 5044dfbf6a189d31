"""Multi-head attention written out: softmax(q @ k^T * scale) @ v, fp32.

q, k, v: [4, 16, 2048, 64] (B, H, S, D; 34 MB each). Two batched GEMMs: 2 * 2*4*16*2048^2*64 =
68.7 GFLOP -> ~1.4 ms on an H200 at 50 TFLOP/s; the [4, 16, 2048, 2048] score matrix (1.07 GB) is
written, scaled (2 passes), softmaxed (2) and read: 6 passes = 6.4 GB -> ~1.6 ms. Eager ~3 ms.
KG_SUITE_SCALE scales batch and sequence by its square root (the work by about the scale).
"""
import math
import os

import torch
import torch.nn as nn

BATCH, HEADS, SEQ, DIM = 4, 16, 2048, 64


def _scaled(n: int, lo: int = 1, power: float = 1.0) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** power))


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    b, s = _scaled(BATCH, 1, 0.5), _scaled(SEQ, 16, 0.5)
    return [torch.randn(b, HEADS, s, DIM) for _ in range(3)]


def get_init_inputs():
    return [DIM]
