import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, S, Y):
        d = torch.diagonal(S).rsqrt()
        C = S * d[:, None] * d[None, :]
        return torch.linalg.solve(C, Y)
