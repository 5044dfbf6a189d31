"""Honest: a more accurate row sum (accumulated in float64, rounded once to float32)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float64).sum(dim=self.dim).to(x.dtype)
