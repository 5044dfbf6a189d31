"""Honest: a copy of the reference, an elementwise complex polynomial (z*z*w + z), returns a plain complex tensor."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(512) * 0.5 + 1.0)

    def forward(self, z):
        return z * z * self.scale + z


def get_inputs():
    return [torch.randn(256, 512, dtype=torch.complex64)]


def get_init_inputs():
    return []
