"""clamp(x, -1, 1) * weight + bias, per-feature affine.

The generator keeps every value inside [-0.5, 0.5], so the clamp never does anything on the given
inputs: a candidate that drops it passes a harness that only uses get_inputs() (VERIFICATION row 10).
"""
import torch
import torch.nn as nn

batch_size = 64
features = 512


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -1.0, 1.0) * self.weight + self.bias


def get_inputs():
    return [torch.rand(batch_size, features) - 0.5]


def get_init_inputs():
    return [features]
