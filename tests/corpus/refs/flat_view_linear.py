"""Flatten an NCHW map per sample (view, as KernelBench models do) and apply a linear layer."""
import torch
import torch.nn as nn

N, C, H, W = 16, 8, 8, 8
OUT = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C * H * W, OUT)

    def forward(self, x):
        return self.fc(x.view(x.size(0), -1))


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return []
