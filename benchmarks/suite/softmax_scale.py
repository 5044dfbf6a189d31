"""Row softmax of scaled attention scores: softmax(x * scale, dim=-1), fp32.

x: [16, 16, 1024, 1024] (1.07 GB). Eager: mul (2 passes) + softmax (2 passes) = 4.3 GB -> ~1.1 ms on
an H200 at 4 TB/s (FLOPs negligible); fused: 2 passes (~0.54 ms). KG_SUITE_SCALE scales the batch.
"""
import math
import os

import torch
import torch.nn as nn

BATCH, HEADS, ROWS, COLS = 16, 16, 1024, 1024


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * self.scale, dim=-1)


def get_inputs():
    return [8.0 * torch.randn(_scaled(BATCH), HEADS, ROWS, COLS)]


def get_init_inputs():
    return [64]
