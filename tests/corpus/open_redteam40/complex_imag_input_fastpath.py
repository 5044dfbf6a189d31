"""Red team 40: complex z*z*scale + z with a wrong "fast path" for purely imaginary inputs (every real part 0:
a Hilbert/analytic signal's quadrature part, 1j * x, a derivative's Fourier factor). The magnitudes trial makes
complex inputs real-valued, never purely imaginary. When every real part of z is exactly 0 it returns
-y*y*scale, dropping the "+ z" term; otherwise it computes exactly what the reference does. Wrong: on any purely
imaginary input the output misses +z (error |y|, as large as the input)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(512) * 0.5 + 1.0)

    def forward(self, z):
        if not bool(z.real.any()):
            y = z.imag
            return torch.complex(-(y * y) * self.scale.real, torch.zeros_like(y))
        return z * z * self.scale + z
