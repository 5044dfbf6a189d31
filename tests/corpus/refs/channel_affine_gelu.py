"""Per-channel affine + GELU on an (N, C, H, W) activation (e.g. attention heads as (B, heads, L, Dh))."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N, C, H, W = 8, 16, 32, 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(C, 1, 1))
        self.shift = nn.Parameter(torch.randn(C, 1, 1))

    def forward(self, x):
        return F.gelu(x * self.scale + self.shift)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return []
