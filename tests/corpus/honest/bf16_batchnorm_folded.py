"""Honest: the batch norm folded into a per-channel scale and shift, held in bf16 as a fused convolution epilogue
holds them, then x * scale + shift: each channel's scale is rounded once, so a channel's outputs share its error."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(32).to(torch.bfloat16)

    def forward(self, x):
        bn = self.bn
        scale = bn.weight.float() * torch.rsqrt(bn.running_var.float() + bn.eps)
        shift = bn.bias.float() - bn.running_mean.float() * scale
        scale, shift = scale.to(x.dtype), shift.to(x.dtype)
        return x * scale[None, :, None, None] + shift[None, :, None, None]
