"""A diffusion block's timestep conditioning (adaLN): a sinusoidal embedding of the timestep through an MLP gives a
per-sample scale and shift, applied to the tokens before a projection. The batch shares one timestep (as a
sampler passes it: t.expand(batch))."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

B, N, D, FREQ, H = 4, 192, 512, 256, 3072


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.t1 = nn.Linear(FREQ, H)
        self.t2 = nn.Linear(H, H)
        self.t3 = nn.Linear(H, 2 * D)
        self.proj = nn.Linear(D, D)

    def embed(self, t: torch.Tensor) -> torch.Tensor:
        half = FREQ // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=self.t1.weight.dtype) / half)
        a = t[:, None].to(freqs.dtype) * freqs[None]
        emb = torch.cat([torch.cos(a), torch.sin(a)], dim=-1)
        return self.t3(F.silu(self.t2(F.silu(self.t1(emb)))))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        scale, shift = self.embed(t).chunk(2, dim=-1)
        return self.proj(x * (1 + scale[:, None]) + shift[:, None])


def get_inputs():
    t0 = int(torch.randint(0, 1000, (1,)))
    return [torch.randn(B, N, D), torch.full((B,), t0, dtype=torch.long)]


def get_init_inputs():
    return []
