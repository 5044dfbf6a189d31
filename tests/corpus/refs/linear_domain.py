"""Linear 1024 -> 1024 on a (256, 1024) batch; input 0 lives in [-1, 1] (declared in contracts/domain_pm1.toml)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def get_inputs():
    return [torch.rand(256, 1024) * 2 - 1]


def get_init_inputs():
    return []
