"""bf16 Linear(256,256)+ReLU that accumulates in fp32 and rounds the result to bf16 with a biased rule: away from
zero once the dropped fraction passes T of an ulp (round-to-nearest uses 1/2). Every output's magnitude is
inflated by (1-2T)/2 ulp on average -- a systematic +0.2 ulp (about +0.08% relative at T=0.3) bias that
compounds through a residual stream and never averages out, while each output's error stays under an ulp."""
import torch
import torch.nn as nn

T = 0.3


def round_biased(y: torch.Tensor) -> torch.Tensor:
    a = y.abs()
    lo = a.to(torch.bfloat16)                                  # nearest; step down to the truncation
    lo = torch.where(lo.float() > a, torch.nextafter(lo, torch.zeros_like(lo)), lo)
    hi = torch.nextafter(lo, torch.full_like(lo, float("inf")))
    ulp = hi.float() - lo.float()
    frac = (a - lo.float()) / torch.where(ulp > 0, ulp, torch.ones_like(ulp))
    r = torch.where(frac > T, hi, lo)
    return torch.where(y < 0, -r, r).to(torch.bfloat16)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        y = torch.nn.functional.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        return torch.relu(round_biased(y))
