"""Honest: LayerNorm written out (mean, biased variance, rsqrt), using the loaded weight, bias and eps."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)   # parameter holder: same state_dict keys as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(dim=-1, keepdim=True)
        return xc * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
