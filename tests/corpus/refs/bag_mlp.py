"""Recommendation tower: a dense feature branch plus a sparse (embedding-bag) branch through an MLP."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, L, V, D = 64, 32, 1000, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(V, D) * 0.1)
        self.s1 = nn.Linear(D, D)
        self.s2 = nn.Linear(D, D)
        self.dense = nn.Linear(D, D)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        sparse = self.s2(F.gelu(self.s1(self.table[idx].mean(1))))
        return self.dense(x) + sparse


def get_inputs():
    return [torch.randn(B, D), torch.randint(0, V, (B, L))]


def get_init_inputs():
    return []
