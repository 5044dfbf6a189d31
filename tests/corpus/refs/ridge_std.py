"""Batched ridge (kernel) solves over 64 systems; features standardised by their global scale first."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int, lam: float):
        super().__init__()
        self.lam = lam
        self.n = n

    def forward(self, M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M = M / M.std()
        A = M @ M.transpose(-1, -2) + self.lam * torch.eye(self.n, dtype=M.dtype, device=M.device)
        return torch.linalg.solve(A, b)


def get_inputs():
    return [torch.randn(64, 8, 12), torch.randn(64, 8)]


def get_init_inputs():
    return [8, 1e-7]
