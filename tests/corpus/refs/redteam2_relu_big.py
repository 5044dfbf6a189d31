"""ReLU on a (2048, 2048) fp32 matrix (16 MiB): the harness's per-iteration work (fresh inputs, digests)
is a large share of every row's figure."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []
