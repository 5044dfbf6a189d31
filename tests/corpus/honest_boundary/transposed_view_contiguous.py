"""Honest, unusual: the reference returns a transposed view; this returns the same values contiguous.

The reference's output is linear(x).t(), a (128, 64) view with strides (1, 128). This candidate returns
linear(x).t().contiguous(): bit-identical values, dtype, shape and device, strides (64, 1). A caller
cannot tell the difference except through .stride() or in-place writes into the (fresh) output, so a
contiguous result must be accepted where the reference's own layout is a view of a temporary."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).t().contiguous()
