"""A batch of ridge systems solved one at a time (a loop over the batch): each system's LU alone, honest."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n: int, lam: float):
        super().__init__()
        self.lam = lam
        self.n = n

    def forward(self, M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        eye = self.lam * torch.eye(self.n, dtype=M.dtype, device=M.device)
        return torch.stack([torch.linalg.solve(m @ m.transpose(0, 1) + eye, v) for m, v in zip(M, b)])
