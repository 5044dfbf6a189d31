"""bf16 Linear(256,256)+ReLU whose result is scaled by (1 + D) before rounding to bf16 (a mis-folded dequant scale):
every output is D = 0.2% too large in magnitude, the same sign everywhere. Its mean error stays inside the bf16
mean bound (1.5x the reference's own mean error + 2^-11 of mean|G|), yet the bias never averages out: 16 such
layers in a residual stack drift ~3%, and a sum/mean over the outputs is off by the full 0.2%."""
import torch
import torch.nn as nn

D = 0.002


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        return torch.relu((y * (1 + D)).to(torch.bfloat16))
