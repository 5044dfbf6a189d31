"""Compositional encoder: each row is a sample of positive abundances (exponential); the centred log-ratio
transform (log, centred over the row: the sample's total drops out) goes through a small MLP."""
import torch
import torch.nn as nn

B, L, H = 16, 256, 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, H), nn.GELU(), nn.Linear(H, H), nn.GELU(), nn.Linear(H, H))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.log(x)
        z = z - z.mean(dim=1, keepdim=True)
        return self.mlp(z.unsqueeze(-1))


def get_inputs():
    return [torch.empty(B, L).exponential_(1.0)]


def get_init_inputs():
    return []
