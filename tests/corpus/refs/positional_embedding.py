"""Learned positional embeddings for a batch of token sequences: one row per position, added to the tokens' features."""
import torch
import torch.nn as nn

BATCH, SEQ, D = 8, 64, 128


class Model(nn.Module):
    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.pos = nn.Embedding(max_len, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pos(torch.arange(x.shape[1], device=x.device))


def get_inputs():
    return [torch.randn(BATCH, SEQ, D)]


def get_init_inputs():
    return [SEQ, D]
