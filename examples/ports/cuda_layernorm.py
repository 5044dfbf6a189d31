"""LayerNorm over the last dim as a CUDA C++ kernel built with load_inline: one block per row, the sums reduced
with warp shuffles and a shared-memory stage. A kernel implementation to port
(`kernelgate port examples/ports/cuda_layernorm.py --to pallas --target cuda`); it needs a GPU and nvcc."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__device__ float block_sum(float v, float* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? shared[lane] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) shared[0] = v;
    __syncthreads();
    float total = shared[0];
    __syncthreads();
    return total;
}

__global__ void layernorm_kernel(const float* x, const float* w, const float* b, float* y, int n, float eps) {
    __shared__ float shared[32];
    const float* row = x + (long)blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += row[i];
    float mean = block_sum(s, shared) / n;
    float q = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { float d = row[i] - mean; q += d * d; }
    float rstd = rsqrtf(block_sum(q, shared) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        y[(long)blockIdx.x * n + i] = (row[i] - mean) * rstd * w[i] + b[i];
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    auto y = torch::empty_like(x);
    int n = x.size(-1);
    int rows = x.numel() / n;
    layernorm_kernel<<<rows, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                    y.data_ptr<float>(), n, (float)eps);
    return y;
}
"""

_ext = None


def _kernels():
    global _ext
    if _ext is None:
        _ext = load_inline("kg_example_cuda_layernorm", cpp_sources="torch::Tensor layernorm(torch::Tensor x, "
                           "torch::Tensor w, torch::Tensor b, double eps);", cuda_sources=CUDA_SRC,
                           functions=["layernorm"], extra_cuda_cflags=["-O3"])
    return _ext


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))
        _kernels()

    def forward(self, x):
        return _kernels().layernorm(x.contiguous(), self.weight.contiguous(), self.bias.contiguous(), 1e-5)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096]
