"""Per-channel scale then GELU on an NCHW map."""
import torch
import torch.nn as nn

N, C, H, W = 8, 32, 16, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(C, 1, 1))

    def forward(self, x):
        return torch.nn.functional.gelu(x * self.scale)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return []
