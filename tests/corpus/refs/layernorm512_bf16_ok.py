"""LayerNorm over 512 features (run with --precision bf16: bf16 computation is acceptable to this user)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(128, 512)]


def get_init_inputs():
    return [512]
