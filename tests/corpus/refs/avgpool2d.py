"""AvgPool2d(kernel 3, stride 2, padding 1, count_include_pad=True) on (4, 8, 32, 32)."""
import torch
import torch.nn as nn

shape = (4, 8, 32, 32)


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(*shape)]


def get_init_inputs():
    return [3, 2, 1]
