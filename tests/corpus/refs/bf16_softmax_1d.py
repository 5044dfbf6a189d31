"""Softmax over one bf16 vector of 8192 logits (a single row: every output shares the row's normalisation)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)


def get_inputs():
    return [torch.randn(8192, dtype=torch.bfloat16) * 4]


def get_init_inputs():
    return []
