"""Two outputs: ReLU and sigmoid of a (64, 256) matrix (a tuple-returning forward)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        return torch.relu(x), torch.sigmoid(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
