import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise: round half to even, the sign bit, an integer indicator, the sign."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.round(x) + 3.0 * torch.signbit(x).float() + 5.0 * (torch.ceil(x) - torch.floor(x)) \
            + 7.0 * torch.sign(x)


def get_inputs():
    return [torch.randn(128, 256)]


def get_init_inputs():
    return []
