"""Honest: matmul accumulated over K in chunks of 64 (as a tiled kernel would)."""
import torch
import torch.nn as nn

CHUNK = 64


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k0 in range(0, a.shape[1], CHUNK):
            out += a[:, k0:k0 + CHUNK] @ b[k0:k0 + CHUNK, :]
        return out
