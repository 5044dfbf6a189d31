"""WRONG: bf16 Linear whose outputs' dynamic range is compressed: the larger outputs (holding half of sum|y|) 0.3%
too small in magnitude, the smaller ones 0.3% too large (an activation-like gain error on magnitudes).
Its signed mean and its mean weighed by the oracle's sign both cancel by construction (red team 57)."""
import torch
import torch.nn as nn
G = 0.003
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)
    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        a = y.abs()[torch.isfinite(y)].flatten().sort().values
        if a.numel() == 0:
            return y.to(torch.bfloat16)
        c = a.cumsum(0)
        t = a[min(int(torch.searchsorted(c, c[-1] / 2)), a.numel() - 1)]
        f = torch.where(y.abs() > t, 1 - G, 1 + G)
        return (y * f).to(torch.bfloat16)
