"""Whitening of M-step series under an AR(1) correlation: the caller passes B series (M x B) and this call's
lag-one correlation rho (a plain float in (0, 1)); the covariance rho^|i-j| is factored (Cholesky) and the
series are whitened by a triangular solve."""
import torch
import torch.nn as nn

M, B = 768, 192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, rho: float) -> torch.Tensor:
        idx = torch.arange(x.shape[0], dtype=x.dtype, device=x.device)
        S = rho ** (idx[:, None] - idx[None, :]).abs()
        L = torch.linalg.cholesky(S)
        return torch.linalg.solve_triangular(L, x, upper=False)


def get_inputs():
    rho = float(0.8 + 0.15 * torch.rand(()))
    return [torch.randn(M, B), rho]


def get_init_inputs():
    return []
