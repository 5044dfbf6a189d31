"""Honest: attention written out: softmax(q k^T / sqrt(d)) v."""
import math
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        return torch.softmax(s, dim=-1) @ v
