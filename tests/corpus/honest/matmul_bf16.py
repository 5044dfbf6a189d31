"""Honest under contracts/bf16.toml: bf16 operands, fp32 accumulation and output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16)).to(a.dtype)
