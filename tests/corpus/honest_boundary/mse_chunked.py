"""Honest, unusual: a scalar loss (the mean of 65536 squared differences), summed in another order.

The reference returns ((pred - target) ** 2).mean(), a 0-d tensor. This sums the squares per row of 256,
then the 256 row sums, and divides: the same mean with a different fp32 rounding. The output is one
number; the 'constant at the mean' mutant of such an output is the output itself, so a task with a
scalar output must not be refused as degenerate for that, and the tolerance of a single number must
allow an honest summation order."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        d = pred - target
        return (d * d).sum(dim=-1).sum() / d.numel()
