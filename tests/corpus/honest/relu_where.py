"""Honest: ReLU as torch.where(x > 0, x, 0)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype, device=x.device))
