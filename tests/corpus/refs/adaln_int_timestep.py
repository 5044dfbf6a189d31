"""A diffusion block's timestep conditioning (adaLN), the timestep passed as a plain Python int (as many
samplers call `model(x, t)`): a sinusoidal embedding through an MLP gives a scale and shift for the tokens,
then a projection. Each call is a new timestep of the sampler's schedule."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

B, N, D, FREQ, H = 2, 8, 512, 256, 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.t1 = nn.Linear(FREQ, H)
        self.t2 = nn.Linear(H, H)
        self.t2b = nn.Linear(H, H)
        self.t3 = nn.Linear(H, 2 * D)
        self.proj = nn.Linear(D, D)

    def embed(self, t: int, dtype) -> torch.Tensor:
        half = FREQ // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=dtype) / half)
        a = float(t) * freqs
        emb = torch.cat([torch.cos(a), torch.sin(a)], dim=-1)
        return self.t3(F.silu(self.t2b(F.silu(self.t2(F.silu(self.t1(emb)))))))

    def forward(self, x: torch.Tensor, t: int) -> torch.Tensor:
        scale, shift = self.embed(t, x.dtype).chunk(2, dim=-1)
        return self.proj(x * (1 + scale) + shift)


def get_inputs():
    return [torch.randn(B, N, D), int(torch.randint(0, 1000, (1,)))]


def get_init_inputs():
    return []
