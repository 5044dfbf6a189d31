"""A projection whose output features are only ever summed: a score head that adds up a linear layer's
outputs after a scale and a per-feature offset. kernelgate's rewrite:reduce-linear computes it as one
matrix-vector product (the GEMM's work divided by the number of features).

    kernelgate optimize examples/feature_sum.py --budget 90
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in: int = 1024, d_out: int = 1024):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        self.offset = nn.Parameter(torch.randn(d_out) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x) * 0.5
        y = y - self.offset
        return torch.sum(y, dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
