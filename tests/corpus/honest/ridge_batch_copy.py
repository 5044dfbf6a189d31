"""The batched ridge solve exactly as the reference writes it: honest."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n: int, lam: float):
        super().__init__()
        self.lam = lam
        self.n = n

    def forward(self, M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        A = M @ M.transpose(-1, -2) + self.lam * torch.eye(self.n, dtype=M.dtype, device=M.device)
        return torch.linalg.solve(A, b)
