"""Three outputs: ReLU, sigmoid and tanh of a (64, 256) matrix."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        return torch.relu(x), torch.sigmoid(x), torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
