"""Example workload: a bottleneck projection with no activation between its two linear maps
(down-projection to 768 then up to 1024, as in some adapter and head designs), over 4096 tokens."""
import torch
import torch.nn as nn

TOKENS, D_MODEL, D_MID = 4096, 1024, 768


class Model(nn.Module):
    def __init__(self, d_model: int, d_mid: int):
        super().__init__()
        self.down = nn.Linear(d_model, d_mid)
        self.up = nn.Linear(d_mid, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(x))


def get_inputs():
    return [torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, D_MID]
