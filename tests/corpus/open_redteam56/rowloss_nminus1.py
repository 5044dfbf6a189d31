"""WRONG: per-sample MSE that divides the sum of squares by N - 1 instead of N (Bessel's correction where none
belongs, a classic slip): every loss 1/511 = 0.196% too large, the same direction on every sample and every call."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        d = x.float() - y.float()
        return ((d * d).sum(-1) / (d.shape[-1] - 1)).to(x.dtype)
