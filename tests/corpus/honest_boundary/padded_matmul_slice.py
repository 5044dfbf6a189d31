"""Honest, unusual: a padded computation, returning the valid slice.

Pads A's rows (14 above, 14 below) and the reduction dimension to multiples of 64 with zeros, as a
tiled kernel would, multiplies, and returns rows 14..113 of the padded product: a view with a storage
offset into a larger storage, with the reference's strides (120, 1). Zero padding adds exact zeros, so
the values are the reference's up to summation order."""
import torch
import torch.nn as nn

TILE = 64


def _up(n: int) -> int:
    return -(-n // TILE) * TILE


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        mp, kp = _up(m), _up(k)
        top = (mp - m) // 2
        ap = a.new_zeros(mp, kp)
        ap[top:top + m, :k] = a
        bp = b.new_zeros(kp, b.shape[1])
        bp[:k] = b
        return (ap @ bp)[top:top + m]
