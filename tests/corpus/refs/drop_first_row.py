"""All rows but the first, as a new tensor: (129, 512) -> (128, 512). Its output is, bit for bit, a
contiguous stretch of the input's memory that starts one row in, so a candidate can return that memory
itself (aliasing) through a storage of its own that starts at an offset pointer."""
import torch
import torch.nn as nn

rows = 129
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[1:].clone()


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []
