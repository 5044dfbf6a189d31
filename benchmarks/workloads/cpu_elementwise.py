"""Pointwise epilogue chain on the CPU, fp32: 1024 x 2048 (a few ms eager on 2 cores).

Affine with per-feature scale and bias, then GELU gated by a sigmoid plus a tanh residual: eight
pointwise ops that eager runs as eight passes over memory.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, D = 1024, 2048


class Model(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.bias = nn.Parameter(0.1 * torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.scale + self.bias
        return F.gelu(h) * torch.sigmoid(x) + 0.5 * torch.tanh(h)


def get_inputs():
    return [torch.randn(ROWS, D)]


def get_init_inputs():
    return [D]
