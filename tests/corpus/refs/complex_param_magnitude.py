"""A complex parameter scaling a complex input, a real output (|z w|): the fp64 oracle must keep the parameter's
imaginary part."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(256, dtype=torch.complex64))

    def forward(self, z):
        return (z * self.w).abs()


def get_inputs():
    return [torch.randn(128, 256, dtype=torch.complex64)]


def get_init_inputs():
    return []
