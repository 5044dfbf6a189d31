"""Honest-looking candidate for the random task (refs/random_noise.py): the same noisy computation.
The verdict must be about the task (error, random_task)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.add(x, torch.rand_like(x), alpha=0.1)
