import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest: z*z*w + z computed on the real and imaginary parts (another rounding order than complex ops)."""
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(512) * 0.5 + 1.0)

    def forward(self, z):
        a, b = z.real, z.imag
        re = (a * a - b * b) * self.scale + a
        im = (2 * a * b) * self.scale + b
        return torch.complex(re, im)
