"""Log-magnitude compression of a complex spectrum (audio front ends): log(1 + |z|) per bin."""
import torch
import torch.nn as nn

N, F = 256, 513


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        return torch.log1p(z.abs())


def get_inputs():
    return [torch.randn(N, F, dtype=torch.complex64)]


def get_init_inputs():
    return []
