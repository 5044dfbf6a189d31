"""Example candidate: the same softmax through exp2 with the max subtracted (a common kernel idiom)."""
import math

import torch
import torch.nn as nn

LOG2E = 1.0 / math.log(2.0)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        z = scores * (self.scale * LOG2E)
        e = torch.exp2(z - z.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
