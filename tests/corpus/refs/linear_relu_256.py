import torch
import torch.nn as nn


class Model(nn.Module):
    """A 256 -> 256 linear layer and a ReLU."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
