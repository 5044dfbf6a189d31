import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """Correct output; but on each call it scribbles over the PREVIOUS call's input tensor
    (a reference kept from the last call) when that is a different buffer."""
    def __init__(self):
        super().__init__()
        self._prev = []
    def forward(self, x):
        for p in self._prev:
            if p.data_ptr() != x.data_ptr():
                p.mul_(0.5)
        self._prev = [x]
        return torch.tanh(x) * 2.0 + 1.0
