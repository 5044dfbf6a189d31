"""NeRF-style view-direction encoding: directions are normalized, then encoded with num_freqs octaves."""
import math
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_freqs: int = 32):
        super().__init__()
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(num_freqs, dtype=torch.float32))

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        d = d / (d.norm(dim=-1, keepdim=True) + 1e-8)
        a = d[..., None] * self.freqs            # (N, 3, L)
        a = a.flatten(-2)
        return torch.cat([d, torch.sin(a), torch.cos(a)], dim=-1)


def get_inputs():
    return [torch.randn(4096, 3)]


def get_init_inputs():
    return []
