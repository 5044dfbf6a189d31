"""Conv2d (3x3, padding 1) + bias + ReLU on the CPU, fp32: batch 4, 64 -> 64 channels, 32x32 (a few ms eager on 2 cores)."""
import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 4, 64, 64, 32, 32


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT]
