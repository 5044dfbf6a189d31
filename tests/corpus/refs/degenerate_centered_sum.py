"""A degenerate task (VERIFICATION row 11): the sum of a row minus its mean is ~0 for every input.

In exact arithmetic the output is identically zero; in fp32 it is rounding noise (~1e-5), so an
all-zeros "candidate" is closer to the fp64 oracle than the reference itself. The gate must refuse
the task (status error, reason degenerate) instead of judging candidates against it.
"""
import torch
import torch.nn as nn

batch_size = 64
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=-1, keepdim=True)).sum(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
