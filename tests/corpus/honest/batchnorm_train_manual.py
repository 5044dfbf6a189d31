"""Honest: batch statistics by hand (mean, biased var over dim 0), then the affine."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))

    def forward(self, x):
        mean = x.mean(dim=0, keepdim=True)
        var = x.var(dim=0, unbiased=False, keepdim=True)
        return (x - mean) * torch.rsqrt(var + 1e-5) * self.weight + self.bias
