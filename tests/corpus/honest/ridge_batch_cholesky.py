"""A batch of ridge systems solved through a Cholesky factorization instead of LU (the matrices are symmetric
positive definite): honest, with its own rounding on each system, wide on the nearly singular ones."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n: int, lam: float):
        super().__init__()
        self.lam = lam
        self.n = n

    def forward(self, M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        A = M @ M.transpose(-1, -2) + self.lam * torch.eye(self.n, dtype=M.dtype, device=M.device)
        L, info = torch.linalg.cholesky_ex(A)
        x = torch.cholesky_solve(b.unsqueeze(-1), L).squeeze(-1)
        bad = info != 0                       # not positive definite in float32: LU as the reference does
        if bool(bad.any()):
            x = torch.where(bad.unsqueeze(-1), torch.linalg.solve(A, b), x)
        return x
