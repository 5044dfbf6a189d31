"""Example workload: multi-head self-attention written out by hand (matmul, scale, softmax, matmul)."""
import math

import torch
import torch.nn as nn

BATCH, HEADS, SEQ, DIM = 2, 8, 1024, 64


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    return [torch.randn(BATCH, HEADS, SEQ, DIM) for _ in range(3)]


def get_init_inputs():
    return [DIM]
