"""Honest-looking candidate for the degenerate task (refs/degenerate_centered_sum.py): the same
computation in float64. The verdict must be about the task (error, degenerate), not this candidate."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x64 = x.to(torch.float64)
        return (x64 - x64.mean(dim=-1, keepdim=True)).sum(dim=-1).to(x.dtype)
