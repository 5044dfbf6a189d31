"""Matched-filter bank: each signal correlated (FFT convolution, full linear length L + K - 1) with C learned
filters, peak response per filter. The caller passes the transform length nfft (a fast length >= L + K - 1 from
its shared FFT plan cache)."""
import torch
import torch.nn as nn

B, C, L, K = 16, 32, 4000, 97
N = L + K - 1


def _smooth(n):
    for p in (2, 3, 5):
        while n % p == 0:
            n //= p
    return n == 1


FAST = [n for n in range(N, N + N // 4 + 1) if _smooth(n)]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Parameter(torch.randn(C, K) / K ** 0.5)

    def forward(self, x: torch.Tensor, nfft: int) -> torch.Tensor:
        X = torch.fft.rfft(x, n=nfft)[:, None, :]              # (B, 1, F)
        H = torch.fft.rfft(self.h, n=nfft)[None]               # (1, C, F)
        y = torch.fft.irfft(X * H, n=nfft)[..., : x.shape[-1] + self.h.shape[-1] - 1]
        return y.amax(-1)


def get_inputs():
    return [torch.randn(B, L), FAST[int(torch.randint(len(FAST), ()))]]


def get_init_inputs():
    return []
