"""3x3 convolution + eval-mode BatchNorm + ReLU, fp32 (a ResNet stage-2 layer at batch 64).

x: [64, 256, 56, 56], conv 256 -> 256, 3x3, padding 1, no bias.
Conv: 2*64*256*56*56*256*9 = 237 GFLOP -> ~4.7 ms on an H200 at 50 TFLOP/s (cuDNN's default TF32 for
convs can make it several times faster); conv out + BN + ReLU: 6 passes of 205 MB = 1.23 GB -> ~0.31 ms.
Eager ~5 ms (fp32 math). KG_SUITE_SCALE scales the batch.
"""
import os

import torch
import torch.nn as nn

BATCH, CH, SIZE = 64, 256, 56


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        with torch.no_grad():               # trained-looking statistics, so eval-mode BN is not the identity
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(_scaled(BATCH), CH, SIZE, SIZE)]


def get_init_inputs():
    return [CH, CH]
