"""relu(x * 1.5 + 0.25) on a (4096, 1024) float32 matrix (16 MiB): three eager passes, a few ms on the CPU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 1.5 + 0.25)


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []
