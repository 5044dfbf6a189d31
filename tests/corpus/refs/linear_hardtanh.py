"""Linear (128 -> 128) followed by hardtanh. With inputs ~ 0.25 * N(0, 1) and the default init, outputs stay
within about +-0.8, so hardtanh never clips on the given generator (row 10); inputs scaled x4 clip ~8%."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
features = 128


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(self.linear(x), -1.0, 1.0)


def get_inputs():
    return [0.25 * torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
