import torch
import torch.nn as nn


class Model(nn.Module):
    """2 tanh(x) + 1 over a 4-D input of 1 MiB (it crosses to the worker through the shared region)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 2.0 + 1.0


def get_inputs():
    return [torch.randn(8, 16, 32, 64)]


def get_init_inputs():
    return []
