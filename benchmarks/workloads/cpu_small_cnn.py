"""A small CNN on the CPU, fp32: three conv + batch norm + ReLU blocks with a max pool, global average pool and a
linear head; batch 4 of 3x48x48 (a few ms eager on 2 cores)."""
import torch
import torch.nn as nn

BATCH, CLASSES, SIDE = 4, 10, 48


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        layers, c = [], 3
        for width in (32, 64, 64):
            layers += [nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
            c = width
        layers.insert(3, nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(BATCH, 3, SIDE, SIDE)]


def get_init_inputs():
    return [CLASSES]
