"""bf16 Linear(256, 256), no activation (a projection in a residual block)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(64, 256, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
