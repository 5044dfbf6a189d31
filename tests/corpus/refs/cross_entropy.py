"""Cross-entropy of (128, 1000) logits against integer targets, with PyTorch's default ignore_index (-100):
targets equal to -100 do not count, in the sum or in the mean's denominator. The generator only draws
targets in [0, 1000), so the ignored value never appears in the given inputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
classes = 1000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch_size, classes), torch.randint(0, classes, (batch_size,))]


def get_init_inputs():
    return []
