"""Small CNN: four conv-BN-ReLU blocks (3->64, 64->128 /2, 128->256 /2, 256->256), global average
pooling and a linear head (1000 classes), fp32, eval mode.

x: [64, 3, 128, 128]. Convs: 3.6 + 38.7 + 38.7 + 77.3 = 158 GFLOP -> ~3.2 ms on an H200 at
50 TFLOP/s (less with cuDNN's default TF32); activations through conv, BN and ReLU: ~3.2 GB ->
~0.8 ms. Eager ~4 ms (fp32 math). KG_SUITE_SCALE scales the batch.
"""
import os

import torch
import torch.nn as nn

BATCH, SIZE, CLASSES = 64, 128, 1000


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


def _block(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    bn = nn.BatchNorm2d(c_out)
    with torch.no_grad():                   # trained-looking statistics, so eval-mode BN is not the identity
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), bn, nn.ReLU())


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.features = nn.Sequential(_block(3, 64, 1), _block(64, 128, 2), _block(128, 256, 2),
                                      _block(256, 256, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def get_inputs():
    return [torch.randn(_scaled(BATCH), 3, SIZE, SIZE)]


def get_init_inputs():
    return [CLASSES]
