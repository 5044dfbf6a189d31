"""A bank of five complex Gram-type products of one signal block (phase-rotated), magnitudes summed."""
import torch
import torch.nn as nn

N, D = 256, 256
K = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        acc = torch.zeros(z.shape[0], z.shape[0])
        for k in range(K):
            rot = complex(torch.cos(torch.tensor(0.3 * k)).item(), torch.sin(torch.tensor(0.3 * k)).item())
            acc = acc + torch.abs(z @ (z.mT * rot + z.mH))
        return acc


def get_inputs():
    return [torch.randn(N, D, dtype=torch.complex64)]


def get_init_inputs():
    return []
