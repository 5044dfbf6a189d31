"""Honest: the batch mean as a matmul with a ones vector (a GEMV), then the subtraction."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[0]
        mean = (torch.ones(1, n, dtype=x.dtype, device=x.device) @ x) / n
        return x - mean
