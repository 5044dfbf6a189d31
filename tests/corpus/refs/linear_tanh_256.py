import torch
import torch.nn as nn


class Model(nn.Module):
    """tanh of a linear layer."""

    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256, 256]
