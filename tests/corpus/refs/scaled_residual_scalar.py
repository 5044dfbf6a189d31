"""Scaled residual: y = x + alpha * gelu(x), alpha passed per call."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, alpha: float) -> torch.Tensor:
        return x + alpha * F.gelu(x)


def get_inputs():
    return [torch.randn(256, 1024), 0.5]


def get_init_inputs():
    return []
