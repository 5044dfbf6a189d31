"""Inference batch norm (running statistics) on bf16 activations of 32 channels, as after a convolution."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(32).to(torch.bfloat16)
        with torch.no_grad():
            self.bn.running_mean.normal_(0, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.normal_(1, 0.2)
            self.bn.bias.normal_(0, 0.2)

    def forward(self, x):
        bn = self.bn
        return torch.nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0,
                                              bn.eps)


def get_inputs():
    return [torch.randn(8, 32, 32, 32, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
