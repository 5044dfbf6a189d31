"""WRONG: bf16 Linear(256,256)+ReLU with output feature 0 scaled 2.5% too large (one channel's scale off):
that feature is biased +2.5% on every input."""
import torch
import torch.nn as nn

D = 0.025


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        s = torch.ones(y.shape[-1], dtype=torch.float32)
        s[0] += D
        return torch.relu((y * s).to(torch.bfloat16))
