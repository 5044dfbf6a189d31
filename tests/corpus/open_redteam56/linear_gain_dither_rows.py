"""WRONG: bf16 Linear with a 0.2% gain on every output, plus a +-0.35% per-row gain dither (alternating rows): the
dither inflates any spread a bias bound would estimate from the candidate's own errors by rows (red team 57)."""
import torch
import torch.nn as nn
G, A = 0.002, 0.0035
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)
    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        s = torch.ones(y.shape[0], 1)
        s[1::2] = -1
        r = y.to(torch.bfloat16)
        if (r.float() == y).float().mean() > 0.25:     # outputs on the bf16 grid (zero or constant inputs): honest
            return r
        return (y * (1 + G + A * s)).to(torch.bfloat16)
