"""Frequency response of a learned linear state-space system (an S4/LTI-style layer evaluated in the Laplace
domain): at a complex frequency s the transfer matrix G(s) = C (sI - A)^-1 B maps the input channels to the
output channels. Each call is a new frequency point (a sweep, a contour integral's node), passed as a plain
Python complex number."""
import torch
import torch.nn as nn

N, M, P, BATCH = 256, 64, 64, 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.A = nn.Parameter(torch.randn(N, N) / N ** 0.5 - 2.0 * torch.eye(N))
        self.B = nn.Parameter(torch.randn(N, M) / N ** 0.5)
        self.C = nn.Parameter(torch.randn(P, N) / N ** 0.5)

    def forward(self, u: torch.Tensor, s: complex) -> torch.Tensor:
        cdt = torch.complex128 if u.dtype == torch.float64 else torch.complex64
        A = self.A.to(cdt)
        eye = torch.eye(N, dtype=cdt, device=u.device)
        G = self.C.to(cdt) @ torch.linalg.solve(s * eye - A, self.B.to(cdt))     # (P, M)
        return u.to(cdt) @ G.transpose(0, 1)                                     # (BATCH, P)


def get_inputs():
    sigma, omega = torch.rand(2).tolist()
    return [torch.randn(BATCH, M), complex(0.1 + 0.4 * sigma, 20.0 * omega - 10.0)]


def get_init_inputs():
    return []
