"""Feature fusion where the features come as a dict of named maps (a common way to pass multi-source inputs)."""
import torch
import torch.nn as nn

N, D = 256, 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, feats):
        return torch.log1p(feats["a"].abs()) + torch.log1p(feats["b"].abs())


def get_inputs():
    return [{"a": torch.randn(N, D), "b": torch.randn(N, D)}]


def get_init_inputs():
    return []
