"""Average pooling 3x3, stride 1, padding 1, count_include_pad=True (an Inception pool branch), fp32.

x: [64, 256, 128, 128] (1.07 GB). One read and one write: 2.15 GB -> 0.54 ms on an H200 at 4 TB/s
(9 adds per output, FLOPs negligible); PyTorch's NCHW pooling kernel runs below full bandwidth, so
eager is expected at ~0.7-1 ms. KG_SUITE_SCALE scales the batch.
"""
import os

import torch
import torch.nn as nn

BATCH, CH, SIZE = 64, 256, 128


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


class Model(nn.Module):
    def __init__(self, kernel: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel, stride=1, padding=1, count_include_pad=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(_scaled(BATCH), CH, SIZE, SIZE)]


def get_init_inputs():
    return [3]
