"""Softmax over the last dimension of a (64, 512) matrix, and each row's argmax beside it (an integer output)."""
import torch
import torch.nn as nn

batch_size = 64
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return torch.softmax(x, dim=-1), torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
