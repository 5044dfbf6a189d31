"""Honest: softmax with the exp2 idiom used by fused kernels: exp(t) = exp2(t * log2(e))."""
import math

import torch
import torch.nn as nn

LOG2E = math.log2(math.e)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = torch.exp2((x - x.amax(dim=-1, keepdim=True)) * LOG2E)
        return p / p.sum(dim=-1, keepdim=True)
