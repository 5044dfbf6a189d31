"""Honest: softmax in base 2 with the logits scaled by log2(e) before their max is subtracted, as fused attention
kernels do (one multiply folded into the scale). Far from zero it errs by the logits' own rounding, u|x|, where the
reference, subtracting the max first, errs far less: the far families permit the inputs' rounding."""
import torch
import torch.nn as nn

LOG2E = 1.4426950408889634


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * LOG2E
        e = torch.exp2(y - y.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
