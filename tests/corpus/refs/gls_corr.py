"""Generalised least squares on the correlation scale: each call gets a shrunk sample covariance S (positive
definite) and right-hand sides Y; S is normalised to its correlation matrix and the system solved in double
precision (the normal equations lose digits in float32)."""
import torch
import torch.nn as nn

N, D, K = 512, 1536, 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, S: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        d = torch.diagonal(S).rsqrt()
        C = S * d[:, None] * d[None, :]
        return torch.linalg.solve(C.double(), Y.double()).to(Y.dtype)


def get_inputs():
    X = torch.randn(N, D)
    S = 0.5 * (X @ X.T) / D + 0.5 * torch.diag(0.5 + torch.rand(N))
    return [S, torch.randn(N, K)]


def get_init_inputs():
    return []
