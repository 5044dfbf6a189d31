"""A linear layer with its bias and ReLU fused, as one Triton GEMM kernel (fp32 operands, products at full
precision): a kernel implementation to port
(`kernelgate port examples/ports/triton_linear_relu.py --to pallas --target cuda`)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rows = pm * BM + tl.arange(0, BM)
    cols = pn * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + ks
        a = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * K + kk[:, None], mask=(cols[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0)[None, :]
    acc = tl.maximum(acc, 0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.fc.weight.shape[0]
        y = torch.empty(m, n, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
        linear_relu_kernel[grid](x, self.fc.weight, self.fc.bias, y, m, n, k, BM=64, BN=64, BK=32)
        return y


def get_inputs():
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return [2048, 2048]
