"""Rows of a learned (1000, 64) table picked by a (64, 32) index tensor, as `table[idx]`: Python-style
indexing, so a negative index counts from the end (-1 is the last row). The generator draws indices in
[0, 1000) only."""
import torch
import torch.nn as nn

vocab = 1000
dim = 64


class Model(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, dim))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table[idx]


def get_inputs():
    return [torch.randint(0, vocab, (64, 32))]


def get_init_inputs():
    return [vocab, dim]
