"""Honest: LayerNorm written op by op in the input's dtype (mean, centred values, variance, rsqrt): each row's
statistics are rounded on the way, so all of a row's outputs share those roundings' errors."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        d = x - m
        v = (d * d).mean(-1, keepdim=True)
        return d * torch.rsqrt(v + 1e-5)
