"""A random task: forward draws noise with torch.rand_like, so two runs on the same input differ.

Outputs cannot be compared; the gate must say so (status error, reason random_task).
"""
import torch
import torch.nn as nn

batch_size = 64
dim = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.1 * torch.rand_like(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
