"""Conv-feature head: a feature map flattened with view (as KernelBench models do), projected, then gated by
a per-sample gate and shifted by a per-sample bias, both (B, D)."""
import torch
import torch.nn as nn

B, C, H, W, D = 16, 8, 8, 8, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C * H * W, D)

    def forward(self, x, gate, bias):
        h = self.fc(x.view(x.size(0), -1))
        return h * torch.sigmoid(gate) + bias


def get_inputs():
    return [torch.randn(B, C, H, W), torch.randn(B, D), torch.randn(B, D)]


def get_init_inputs():
    return []
