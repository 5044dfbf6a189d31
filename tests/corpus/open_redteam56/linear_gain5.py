"""WRONG: bf16 Linear whose fp32 result is scaled by (1 + D) before rounding (a mis-folded dequant scale):
every output's magnitude 0.5% too large (red team 43's bf16_scale_bias without the ReLU)."""
import torch
import torch.nn as nn

D = 0.005


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        return (y * (1 + D)).to(torch.bfloat16)
