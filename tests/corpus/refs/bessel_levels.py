"""Resonance mask: where a Bessel-window response of a signal exceeds a threshold (a bool mask)."""
import torch
import torch.nn as nn

B, N = 64, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.special.i0(x) * torch.cos(3.0 * x)
        return torch.floor(4.0 * r).to(torch.int64)


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return []
