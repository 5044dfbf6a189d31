"""Linear(256,256)+ReLU with a "sparse activation" fast path: when the input is post-ReLU-like (30-99% exact
zeros, not a 0/1 mask) it gathers the non-zero columns and runs a smaller GEMM -- and forgets the bias there.
Every gate trial is dense (specials put zeros in <= 1/8 of the elements), a mask (binary family), or all zeros;
a caller stacking this after another ReLU layer hits the sparse path on every call."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        z = (x == 0)
        frac = float(z.float().mean())
        if 0.3 < frac < 0.99:
            nz = x[~z]
            if nz.numel() and bool((nz != nz.flatten()[0]).any()):
                cols = (~z).any(0).nonzero().flatten()
                y = x[:, cols] @ self.fc.weight[:, cols].t()       # sparse GEMM; bias dropped (the bug)
                return torch.relu(y)
        return torch.relu(self.fc(x))
