"""Honest: linear via einsum, GELU written with erf."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.einsum("bi,oi->bo", x, self.linear.weight) + self.linear.bias
        return 0.5 * y * (1.0 + torch.erf(y * (1.0 / math.sqrt(2.0))))
