"""Gram matrices of a list of feature blocks (one per pyramid level), soft-clipped and summed."""
import torch
import torch.nn as nn

N, D, L = 256, 256, 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, feats):
        return sum(torch.tanh(f @ f.T * 0.05) for f in feats)


def get_inputs():
    return [[torch.randn(N, D) for _ in range(L)]]


def get_init_inputs():
    return []
