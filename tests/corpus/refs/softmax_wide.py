"""Softmax over wide rows: (8, 8192). Every output is below ~0.01, so all-zeros or a constant 1/N
passes a fixed atol of 1e-2 (VERIFICATION row 11)."""
import torch
import torch.nn as nn

batch_size = 8
dim = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
