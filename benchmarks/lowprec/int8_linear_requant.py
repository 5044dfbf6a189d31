"""int8 linear with requantization: int8 x int8 -> exact integer accumulate (+ int32 bias) -> scale ->
round half to even -> clamp to [-128, 127] -> int8.

x: [4096, 4096] int8 activations; w: [4096, 4096] int8 weight, int32 bias, per-tensor activation scale,
per-channel weight scales, per-tensor output scale (buffers). PyTorch has no int8 or int32 GEMM on CUDA, so
the reference accumulates in fp64, which is exact here (|acc| < 2^31 << 2^53): a 137 GFLOP fp64 GEMM, about
2.5-3 ms on an H200. The requantization runs in the scale buffers' dtype (fp32 as users run it, fp64 in the
oracle). torch._int_mm gives the same integers on int8 tensor cores and one fused epilogue
(precision:int8-requant) does the rest with torch's rounding.
KG_SUITE_SCALE scales all three dims by its cube root (multiples of 16).
"""
import os

import torch
import torch.nn as nn

M, K, N = 4096, 4096, 4096


def _scaled(n: int) -> int:
    return max(32, int(round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** (1 / 3) / 16)) * 16)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("w", torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8))
        self.register_buffer("bias", torch.randint(-20000, 20001, (out_features,), dtype=torch.int32))
        self.register_buffer("s_x", torch.tensor(0.02))
        self.register_buffer("s_w", torch.rand(out_features) * 0.002 + 0.004)
        # about 2% of the outputs saturate at the int8 range: dropping the clamp is observable
        self.register_buffer("s_out", torch.tensor(0.16 * (in_features / 256) ** 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = x.to(torch.float64) @ self.w.to(torch.float64).t() + self.bias     # exact integers
        y = acc.to(self.s_out.dtype) * (self.s_x * self.s_w) / self.s_out
        return torch.clamp(torch.round(y), -128, 127).to(torch.int8)


def get_inputs():
    return [torch.randint(-128, 128, (_scaled(M), _scaled(K)), dtype=torch.int8)]


def get_init_inputs():
    return [_scaled(K), _scaled(N)]
