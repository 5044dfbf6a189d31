"""Two outputs: tanh of a (256, 512) matrix, and a copy of it (a caller may edit either in place)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        y = torch.tanh(x)
        return y, y.clone()


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return []
