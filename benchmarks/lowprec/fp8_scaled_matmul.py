"""fp8 e4m3 scaled matmul, dequantize-then-matmul: y = (x * x_scale) @ (w * w_scale)^T.

x: [8192, 8192] e4m3 activations with a per-row fp32 scale [8192, 1] (inputs); w: [8192, 8192] e4m3 weight
with a per-tensor scale (buffers). The reference dequantizes to the scale buffer's dtype (bf16 as users run
it, fp64 in the oracle) and multiplies: a bf16 GEMM of 1.1 TFLOP (~1.7 ms on an H200) plus two dequantize
passes; the result is bf16. torch._scaled_mm computes the same product on the fp8 operands with fp32
accumulation and applies the scales in its epilogue (precision:fp8-scaled-mm).
KG_SUITE_SCALE scales all three dims by its cube root (multiples of 16, as fp8 GEMMs need).
"""
import os

import torch
import torch.nn as nn

M, K, N = 8192, 8192, 8192
E4M3 = torch.float8_e4m3fn


def _scaled(n: int) -> int:
    return max(16, int(round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** (1 / 3) / 16)) * 16)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        w = torch.randn(out_features, in_features) * 100.0          # spans most of e4m3's range (max 448)
        self.register_buffer("w", w.clamp(-448.0, 448.0).to(E4M3))
        self.register_buffer("w_scale", torch.tensor(1.0 / 1600.0, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        cd = self.w_scale.dtype                     # bf16 as users run it, fp64 in the oracle
        a = x.to(cd) * x_scale.to(cd)
        b = self.w.to(cd) * self.w_scale
        return a @ b.t()


def get_inputs():
    m, k = _scaled(M), _scaled(K)
    x = (torch.randn(m, k) * 64.0).clamp(-448.0, 448.0).to(E4M3)
    x_scale = torch.rand(m, 1, dtype=torch.float32) * 0.02 + 0.005
    return [x, x_scale]


def get_init_inputs():
    return [_scaled(K), _scaled(N)]
