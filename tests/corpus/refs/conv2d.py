"""Conv2d(8 -> 16, kernel 3, padding 1) on (2, 8, 32, 32)."""
import torch
import torch.nn as nn

shape = (2, 8, 32, 32)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(*shape)]


def get_init_inputs():
    return [8, 16, 3]
