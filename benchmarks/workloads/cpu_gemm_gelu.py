"""Linear (512 -> 1024) + GELU + scale on the CPU, fp32: 256 tokens (a few ms eager on 2 cores)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, D_IN, D_OUT = 256, 512, 1024


class Model(nn.Module):
    def __init__(self, d_in: int, d_out: int, scale: float):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(TOKENS, D_IN)]


def get_init_inputs():
    return [D_IN, D_OUT, 0.5]
