"""Softmax over the last dim of a (128, 512) matrix, its max taken through kthvalue (slow on purpose: room for a
candidate to win honestly)."""
import torch
import torch.nn as nn

batch_size = 128
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.kthvalue(x, x.shape[-1], dim=-1, keepdim=True).values
        e = torch.exp(x - m)
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
