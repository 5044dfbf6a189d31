"""Ridge regression fit: beta = (X^T X + lam I)^{-1} X^T y over 4 features (first and last may be an intercept)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int, lam: float):
        super().__init__()
        self.d = d
        self.lam = lam

    def forward(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        A = X.transpose(0, 1) @ X + self.lam * torch.eye(self.d, dtype=X.dtype, device=X.device)
        return torch.linalg.solve(A, X.transpose(0, 1) @ y)


def get_inputs():
    return [torch.randn(256, 4), torch.randn(256) + 1.0]   # targets with a nonzero mean


def get_init_inputs():
    return [4, 1e-5]
