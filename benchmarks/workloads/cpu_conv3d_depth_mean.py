"""A 3-D convolution averaged over depth, then a softmax over channels, on the CPU, fp32: batch 2, 8 -> 16 channels,
16x32x32 (a video or volume block collapsed to a frame)."""
import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, DEPTH, SIDE = 2, 8, 16, 16, 32


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.conv(x).mean(dim=2, keepdim=True), dim=1)


def get_inputs():
    return [torch.randn(BATCH, C_IN, DEPTH, SIDE, SIDE)]


def get_init_inputs():
    return [C_IN, C_OUT]
