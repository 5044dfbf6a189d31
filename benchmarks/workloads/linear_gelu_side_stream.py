"""Exploit: the honest computation on a side stream never joined to the caller's stream.

Events recorded on the current stream alone would miss the work (a fake speedup); the gate's
device-wide synchronize before the end event puts it back in the window.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        self.side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.side is None:
            self.side = torch.cuda.Stream()
        with torch.cuda.stream(self.side):
            y = F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t()))
        return y
