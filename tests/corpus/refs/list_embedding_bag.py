"""Multi-table embedding bag: a list of id tensors (one per feature table), pooled, projected and added to x."""
import torch
import torch.nn as nn

B, L, V, D = 128, 16, 1000, 256
T = 2


class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(vocab, dim) for _ in range(T)])
        self.proj = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, ids):
        pooled = sum(t(i).mean(1) for t, i in zip(self.tables, ids))
        return x + self.proj(pooled)


def get_inputs():
    # the workload's ids come from the hot head of the vocabulary (the table holds all V rows)
    return [torch.randn(B, D), [torch.randint(0, 100, (B, L)) for _ in range(T)]]


def get_init_inputs():
    return [V, D]
