"""Example workload: a bottleneck projection with no activation between its two linear maps
(down-projection to 768 then up to 1024, as in some adapter and head designs), over 1024 tokens.

The README's main job. 1024 tokens keep one call near 30 ms on a 2-core CPU, so a 90 s budget holds the search,
the confirmation and the check of the emitted module; at 4096 tokens (120 ms a call) the confirmation did not fit
(benchmarks/results/cpu_budget_load_session28.json)."""
import torch
import torch.nn as nn

TOKENS, D_MODEL, D_MID = 1024, 1024, 768


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
