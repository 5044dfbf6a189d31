"""Prototype classifier with per-row noise levels: each row's scores against C class prototypes are standardised
by the row's measured noise variance; returns the best standardised score and class of every row."""
import torch
import torch.nn as nn

B, D, C = 64, 256, 4096
PROTO_SEED = 1234


def _prototypes() -> torch.Tensor:
    return torch.randn(C, D, generator=torch.Generator().manual_seed(PROTO_SEED))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proto = nn.Parameter(_prototypes())

    def forward(self, x: torch.Tensor, var: torch.Tensor):
        scores = (x @ self.proto.T) / torch.sqrt(var)
        best = scores.max(dim=1)
        return best.values, best.indices


def get_inputs():
    labels = torch.randint(0, C, (B,))
    return [_prototypes()[labels] + 0.5 * torch.randn(B, D), 0.5 + torch.rand(B, 1)]


def get_init_inputs():
    return []
