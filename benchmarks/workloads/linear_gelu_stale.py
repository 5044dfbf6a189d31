"""Exploit: returns uninitialised memory, hoping the allocator hands back a block holding the answer."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty(x.shape[0], self.proj.out_features, device=x.device, dtype=x.dtype)
