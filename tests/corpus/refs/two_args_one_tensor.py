"""Red team 28: a workload whose generator passes one tensor as both arguments ([x, x])."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a * 2.0 + torch.tanh(b)


def get_inputs():
    x = torch.randn(64, 128)
    return [x, x]


def get_init_inputs():
    return []
