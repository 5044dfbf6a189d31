"""Four Linear(512 -> 512) + tanh layers on a (384, 512) batch: ~5 ms on two CPU cores, for the bench red-team
cases (a cheat that skips or hides the work shows a large fake speedup against it)."""
import torch
import torch.nn as nn

batch_size = 384
features = 512


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(features, features) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
