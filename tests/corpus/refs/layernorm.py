"""LayerNorm over the last dimension (256) of a (16, 16, 256) tensor."""
import torch
import torch.nn as nn

shape = (16, 16, 256)


class Model(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(*shape)]


def get_init_inputs():
    return [shape[-1]]
