"""Scale-and-ReLU on an NCHW activation."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(32, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale)


def get_inputs():
    return [torch.randn(8, 32, 28, 28)]


def get_init_inputs():
    return []
