"""Honest: average pooling as a depthwise conv2d with 1/k^2 weights.

Zero padding inside the convolution gives count_include_pad=True, like nn.AvgPool2d's default.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.k, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        w = torch.full((c, 1, self.k, self.k), 1.0 / (self.k * self.k), dtype=x.dtype, device=x.device)
        return F.conv2d(x, w, stride=self.stride, padding=self.padding, groups=c)
