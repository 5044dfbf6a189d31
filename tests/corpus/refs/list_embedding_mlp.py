"""Two-tower features: a dense tower on x plus a multi-table embedding bag (a list of id tensors, one per table)."""
import torch
import torch.nn as nn

B, L, V, D = 256, 16, 1000, 256
T = 2


class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(vocab, dim) for _ in range(T)])
        self.proj = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.dense = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, ids):
        pooled = sum(t(i).mean(1) for t, i in zip(self.tables, ids))
        return self.dense(x) + self.proj(pooled)


def get_inputs():
    return [torch.randn(B, D), [torch.randint(0, V, (B, L)) for _ in range(T)]]


def get_init_inputs():
    return [V, D]
