"""Example workload: scaled row softmax over attention-like scores (KernelBench format)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return [0.125]
