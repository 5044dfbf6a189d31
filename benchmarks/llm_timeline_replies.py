"""Scripted model replies for benchmarks/llm_timeline.py: what an LLM agent writes for three dev problems,
replayed in order by the benchmark's OpenAI-compatible server.

REPLIES maps a problem's file stem to, per target ("cuda": Triton kernels, "cpu": plain PyTorch), the replies
in the order the agent sends them. Each reply is (intent, expected gate outcome, reply text); the text is what
the model answers (prose and one ```python block appended to the problem's source, as the prompts ask:
kernelgate/proposers/llm/prompts.py FILE_CONTRACT). The benchmark runs one explorer agent, so the turns are
deterministic: a reply after an accepted candidate answers an "explore" turn, a reply after a rejected one a
"fix" turn carrying the gate's reason and error lines.

The stories:
- Gemm_Swish_Divide_Clamp_Tanh_Clamp: cuBLAS + one fused Triton epilogue (accepted); then a 3xTF32 Triton GEMM
  with the epilogue in-kernel that calls `tl.tanh`, which Triton does not have (fails to build); then the fix.
- Matmul_GELU_Softmax: cuBLAS + a Triton row kernel (exact GELU and softmax in one pass, accepted); then a 3xTF32
  GEMM with the sigmoid form of the tanh GELU "to save the erf" (a wrong result: the reference's GELU is exact);
  then the fix.
- Gemm_GroupNorm_Hardtanh: a Triton GroupNorm + Hardtanh kernel that assumes the GroupNorm affine is the identity
  (its value at initialisation; the gate perturbs parameters: a wrong result); the fix; then a 3xTF32 GEMM under
  the fixed kernel.
The Triton kernels mask every tail (rows, columns, K, groups) and compute in fp32; they were checked against the
reference modules under TRITON_INTERPRET=1 on small and odd shapes with widened, extreme, NaN/Inf inputs and
perturbed parameters (libdevice calls mapped to the interpreter's math).
"""
from __future__ import annotations

# ----------------------------------------------------------------------------------------------------------
# GEMM + swish / 2 / clamp / tanh / clamp
# ----------------------------------------------------------------------------------------------------------

GEMM_TANH_EPILOGUE = r'''The GEMM is cuBLAS-bound; the six pointwise kernels after it (sigmoid, mul, div, clamp, tanh, clamp)
each read and write the whole [batch, out_features] tensor. I keep cuBLAS for the GEMM (same op as the
reference) and fuse the whole epilogue into one Triton kernel: one read, one write. tanh comes from libdevice
for accuracy; the last clamp is a no-op on tanh's range but NaN still passes through.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def swish_div_clamp_tanh_kernel(y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = y * (1.0 / (1.0 + libdevice.exp(-y)))                  # swish
    s = s * 0.5                                                # / 2.0 (exact)
    s = tl.where(s < -1.0, -1.0, tl.where(s > 1.0, 1.0, s))    # clamp(-1, 1); NaN passes as in torch
    t = libdevice.tanh(s)
    t = tl.where(t < -1.0, -1.0, tl.where(t > 1.0, 1.0, t))    # clamp(-1, 1)
    tl.store(out_ptr + offs, t.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        y = F.linear(x, self.gemm.weight, self.gemm.bias).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        if n == 0:
            return out
        BLOCK = 1024
        swish_div_clamp_tanh_kernel[(triton.cdiv(n, BLOCK),)](y, out, n, BLOCK=BLOCK, num_warps=4)
        return out
```
'''

GEMM_TANH_TF32X3_BROKEN = r'''Now the GEMM itself, which is nearly all of the time: fp32 on the tensor cores as 3xTF32 (each operand split
into a TF32 high part and a TF32 low part, hi*hi + hi*lo + lo*hi accumulated in fp32: fp32-level accuracy at
tensor-core speed; Triton's `input_precision="tf32x3"`), 128x128x64 tiles, grouped tile order for L2 reuse,
and the epilogue applied to the accumulator before the only store. No intermediate tensor at all.

```python
import torch
import triton
import triton.language as tl


@triton.jit
def linear_swish_tanh_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                             stride_xm, stride_xk, stride_wn, stride_wk,
                             HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)          # rows / columns past the edge read a valid row and are not stored
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + offs_k[:, None] * stride_wk     # W^T tile [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]

    s = acc * (1.0 / (1.0 + tl.exp(-acc)))          # swish
    s = s * 0.5
    s = tl.minimum(tl.maximum(s, -1.0), 1.0)
    t = tl.tanh(s)
    t = tl.minimum(tl.maximum(t, -1.0), 1.0)

    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(out_ptrs, t, mask=mask)


class ModelNew(Model):
    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M == 0 or N == 0:
            return out.reshape(*x.shape[:-1], N)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        linear_swish_tanh_kernel[grid](x2, w, b if b is not None else w, out, M, N, K,
                                       x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                                       HAS_BIAS=b is not None, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                       num_warps=8, num_stages=3)
        return out.reshape(*x.shape[:-1], N)
```
'''

GEMM_TANH_TF32X3_FIXED = r'''`triton.language` has no `tanh`: it is in libdevice. Fixed that (and the swish's exp comes from libdevice too,
as accurate as torch's); I also keep NaN propagating through both clamps as torch.clamp does (tl.minimum /
tl.maximum drop NaN). The rest is unchanged: 3xTF32 GEMM, 128x128x64 tiles, epilogue on the accumulator.

```python
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def linear_swish_tanh_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                             stride_xm, stride_xk, stride_wn, stride_wk,
                             HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)          # rows / columns past the edge read a valid row and are not stored
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + offs_k[:, None] * stride_wk     # W^T tile [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]

    s = acc * (1.0 / (1.0 + libdevice.exp(-acc)))                # swish
    s = s * 0.5                                                  # / 2.0 (exact)
    s = tl.where(s < -1.0, -1.0, tl.where(s > 1.0, 1.0, s))      # clamp(-1, 1), NaN passes
    t = libdevice.tanh(s)
    t = tl.where(t < -1.0, -1.0, tl.where(t > 1.0, 1.0, t))      # clamp(-1, 1)

    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(out_ptrs, t, mask=mask)


class ModelNew(Model):
    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        if x.dtype != torch.float32 or w.dtype != torch.float32:
            return super().forward(x)
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M == 0 or N == 0:
            return out.reshape(*x.shape[:-1], N)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        linear_swish_tanh_kernel[grid](x2, w, b if b is not None else w, out, M, N, K,
                                       x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                                       HAS_BIAS=b is not None, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                       num_warps=8, num_stages=3)
        return out.reshape(*x.shape[:-1], N)
```
'''

# ----------------------------------------------------------------------------------------------------------
# GEMM + GELU + softmax(dim=1)
# ----------------------------------------------------------------------------------------------------------

GELU_SOFTMAX_ROW = r'''After cuBLAS, the reference runs GELU (one read, one write) and softmax (a max pass, an exp/sum pass, a write).
One Triton program per row does both: the row is loaded once into registers (8192 fp32 columns fit), GELU
(exact, erf form, as F.gelu's default), then a numerically safe softmax (max subtracted), one store.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def gelu_softmax_row_kernel(y_ptr, out_ptr, n_cols, stride_y, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
    g = 0.5 * y * (1.0 + libdevice.erf(y * 0.7071067811865476))       # exact GELU
    g = tl.where(mask, g, float("-inf"))
    e = libdevice.exp(g - tl.max(g, axis=0))
    e = tl.where(mask, e, 0.0)
    p = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, p.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias)
        if y.dim() != 2 or y.shape[1] > 16384 or y.numel() == 0:
            return F.softmax(F.gelu(y), dim=1)
        y = y.contiguous()
        out = torch.empty_like(y)
        n_rows, n_cols = y.shape
        BLOCK = triton.next_power_of_2(n_cols)
        warps = 4 if BLOCK <= 1024 else 8 if BLOCK <= 4096 else 16
        gelu_softmax_row_kernel[(n_rows,)](y, out, n_cols, y.stride(0), out.stride(0), BLOCK=BLOCK,
                                           num_warps=warps)
        return out
```
'''

GELU_SOFTMAX_TF32X3_WRONG = r'''The row kernel is already one pass; the time is the fp32 GEMM. Two changes: the GEMM as 3xTF32 on the tensor
cores in Triton (fp32 accuracy: hi/lo TF32 split, three MMAs, fp32 accumulation; 128x128x64 tiles, grouped
order, bias added on the accumulator), and the GELU in its sigmoid form, x * sigmoid(1.5957691 * (x + 0.044715 x^3)),
which saves the erf in the row kernel.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def linear_tf32x3_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                         stride_xm, stride_xk, stride_wn, stride_wk,
                         HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def gelu_softmax_row_kernel(y_ptr, out_ptr, n_cols, stride_y, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
    z = 1.5957691216057308 * (y + 0.044715 * y * y * y)
    g = y / (1.0 + libdevice.exp(-z))                                 # GELU, sigmoid form
    g = tl.where(mask, g, float("-inf"))
    e = libdevice.exp(g - tl.max(g, axis=0))
    e = tl.where(mask, e, 0.0)
    p = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, p.to(out_ptr.dtype.element_ty), mask=mask)


def linear_tf32x3(x, w, b):
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    linear_tf32x3_kernel[grid](x, w, b if b is not None else w, out, M, N, K, x.stride(0), x.stride(1),
                               w.stride(0), w.stride(1), HAS_BIAS=b is not None, BLOCK_M=128, BLOCK_N=128,
                               BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    return out


class ModelNew(Model):
    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        if (x.dim() != 2 or w.shape[0] > 16384 or x.numel() == 0 or w.shape[0] == 0
                or x.dtype != torch.float32):
            return F.softmax(F.gelu(F.linear(x, w, b)), dim=1)
        y = linear_tf32x3(x, w, b)
        out = torch.empty_like(y)
        n_rows, n_cols = y.shape
        BLOCK = triton.next_power_of_2(n_cols)
        warps = 4 if BLOCK <= 1024 else 8 if BLOCK <= 4096 else 16
        gelu_softmax_row_kernel[(n_rows,)](y, out, n_cols, y.stride(0), out.stride(0), BLOCK=BLOCK,
                                           num_warps=warps)
        return out
```
'''

GELU_SOFTMAX_TF32X3_FIXED = r'''The mismatch is the GELU: the reference calls F.gelu with approximate='none' (the erf form), and the sigmoid
form differs from it by up to about 5e-4 (near x = 2.7), far beyond the tolerance, which the 3xTF32 GEMM
stays within. Back to the exact GELU in the row kernel; the 3xTF32 GEMM stays.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def linear_tf32x3_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                         stride_xm, stride_xk, stride_wn, stride_wk,
                         HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def gelu_softmax_row_kernel(y_ptr, out_ptr, n_cols, stride_y, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
    g = 0.5 * y * (1.0 + libdevice.erf(y * 0.7071067811865476))       # exact GELU, as F.gelu
    g = tl.where(mask, g, float("-inf"))
    e = libdevice.exp(g - tl.max(g, axis=0))
    e = tl.where(mask, e, 0.0)
    p = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, p.to(out_ptr.dtype.element_ty), mask=mask)


def linear_tf32x3(x, w, b):
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    linear_tf32x3_kernel[grid](x, w, b if b is not None else w, out, M, N, K, x.stride(0), x.stride(1),
                               w.stride(0), w.stride(1), HAS_BIAS=b is not None, BLOCK_M=128, BLOCK_N=128,
                               BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    return out


class ModelNew(Model):
    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        if (x.dim() != 2 or w.shape[0] > 16384 or x.numel() == 0 or w.shape[0] == 0
                or x.dtype != torch.float32):
            return F.softmax(F.gelu(F.linear(x, w, b)), dim=1)
        y = linear_tf32x3(x, w, b)
        out = torch.empty_like(y)
        n_rows, n_cols = y.shape
        BLOCK = triton.next_power_of_2(n_cols)
        warps = 4 if BLOCK <= 1024 else 8 if BLOCK <= 4096 else 16
        gelu_softmax_row_kernel[(n_rows,)](y, out, n_cols, y.stride(0), out.stride(0), BLOCK=BLOCK,
                                           num_warps=warps)
        return out
```
'''

# ----------------------------------------------------------------------------------------------------------
# GEMM + GroupNorm + Hardtanh
# ----------------------------------------------------------------------------------------------------------

GROUPNORM_NO_AFFINE = r'''GroupNorm on a [batch, channels] tensor normalizes each (row, group) over its channels; the reference then
runs Hardtanh as another full pass. One Triton program per (row, group): load the group once, mean and
variance in fp32 (two-pass, in registers), normalize, clamp, store. GroupNorm's affine is the identity
(weight ones, bias zeros), so I skip loading it.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def group_norm_hardtanh_kernel(y_ptr, out_ptr, n_channels, group_size, num_groups, eps, lo, hi,
                               BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // num_groups).to(tl.int64)
    group = pid % num_groups
    offs = tl.arange(0, BLOCK)
    mask = offs < group_size
    ch = group * group_size + offs
    base = row * n_channels
    x = tl.load(y_ptr + base + ch, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / group_size
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / group_size
    o = tl.div_rn(d, tl.sqrt_rn(var + eps))
    o = tl.where(o < lo, lo, tl.where(o > hi, hi, o))          # hardtanh; NaN passes as in torch
    tl.store(out_ptr + base + ch, o.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        y = self.gemm(x)
        gn = self.group_norm
        n_ch, groups = y.shape[-1], gn.num_groups
        if y.dim() != 2 or y.numel() == 0 or n_ch // groups > 16384:
            return self.hardtanh(gn(y))
        y = y.contiguous()
        out = torch.empty_like(y)
        size = n_ch // groups
        group_norm_hardtanh_kernel[(y.shape[0] * groups,)](
            y, out, n_ch, size, groups, gn.eps, float(self.hardtanh.min_val), float(self.hardtanh.max_val),
            BLOCK=triton.next_power_of_2(size), num_warps=4)
        return out
```
'''

GROUPNORM_FIXED = r'''Right: the weight and bias are parameters, and the trials load perturbed values into both models, so the
identity is only their initial value. Now the kernel loads both per channel and applies them before the clamp.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def group_norm_hardtanh_kernel(y_ptr, w_ptr, b_ptr, out_ptr, n_channels, group_size, num_groups, eps, lo, hi,
                               BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // num_groups).to(tl.int64)
    group = pid % num_groups
    offs = tl.arange(0, BLOCK)
    mask = offs < group_size
    ch = group * group_size + offs
    base = row * n_channels
    x = tl.load(y_ptr + base + ch, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / group_size
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / group_size
    xhat = tl.div_rn(d, tl.sqrt_rn(var + eps))
    w = tl.load(w_ptr + ch, mask=mask, other=1.0).to(tl.float32)
    b = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    o = xhat * w + b
    o = tl.where(o < lo, lo, tl.where(o > hi, hi, o))          # hardtanh; NaN passes as in torch
    tl.store(out_ptr + base + ch, o.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        y = self.gemm(x)
        gn = self.group_norm
        n_ch, groups = y.shape[-1], gn.num_groups
        if (y.dim() != 2 or y.numel() == 0 or n_ch // groups > 16384
                or gn.weight is None or gn.bias is None):
            return self.hardtanh(gn(y))
        y = y.contiguous()
        out = torch.empty_like(y)
        size = n_ch // groups
        group_norm_hardtanh_kernel[(y.shape[0] * groups,)](
            y, gn.weight, gn.bias, out, n_ch, size, groups, gn.eps, float(self.hardtanh.min_val),
            float(self.hardtanh.max_val), BLOCK=triton.next_power_of_2(size), num_warps=4)
        return out
```
'''

GROUPNORM_TF32X3 = r'''The GroupNorm kernel is one pass now; what is left is the fp32 GEMM, almost all of the time. I replace cuBLAS
fp32 with a Triton 3xTF32 GEMM (hi/lo TF32 split, three tensor-core MMAs, fp32 accumulation: fp32-level
error), 128x128x64 tiles in grouped order, bias added on the accumulator; the fixed GroupNorm + Hardtanh kernel
follows it.

```python
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def linear_tf32x3_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                         stride_xm, stride_xk, stride_wn, stride_wk,
                         HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def group_norm_hardtanh_kernel(y_ptr, w_ptr, b_ptr, out_ptr, n_channels, group_size, num_groups, eps, lo, hi,
                               BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // num_groups).to(tl.int64)
    group = pid % num_groups
    offs = tl.arange(0, BLOCK)
    mask = offs < group_size
    ch = group * group_size + offs
    base = row * n_channels
    x = tl.load(y_ptr + base + ch, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / group_size
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / group_size
    xhat = tl.div_rn(d, tl.sqrt_rn(var + eps))
    w = tl.load(w_ptr + ch, mask=mask, other=1.0).to(tl.float32)
    b = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    o = xhat * w + b
    o = tl.where(o < lo, lo, tl.where(o > hi, hi, o))
    tl.store(out_ptr + base + ch, o.to(out_ptr.dtype.element_ty), mask=mask)


def linear_tf32x3(x, w, b):
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    linear_tf32x3_kernel[grid](x, w, b if b is not None else w, out, M, N, K, x.stride(0), x.stride(1),
                               w.stride(0), w.stride(1), HAS_BIAS=b is not None, BLOCK_M=128, BLOCK_N=128,
                               BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    return out


class ModelNew(Model):
    def forward(self, x):
        lin, gn = self.gemm, self.group_norm
        n_ch, groups = lin.weight.shape[0], gn.num_groups
        if (x.dim() != 2 or x.numel() == 0 or n_ch == 0 or n_ch // groups > 16384
                or x.dtype != torch.float32 or gn.weight is None or gn.bias is None):
            return self.hardtanh(gn(lin(x)))
        y = linear_tf32x3(x, lin.weight, lin.bias)
        out = torch.empty_like(y)
        size = n_ch // groups
        group_norm_hardtanh_kernel[(y.shape[0] * groups,)](
            y, gn.weight, gn.bias, out, n_ch, size, groups, gn.eps, float(self.hardtanh.min_val),
            float(self.hardtanh.max_val), BLOCK=triton.next_power_of_2(size), num_warps=4)
        return out
```
'''

# ----------------------------------------------------------------------------------------------------------
# CPU: plain PyTorch (the same stories, so the whole flow runs on a machine without a GPU)
# ----------------------------------------------------------------------------------------------------------

CPU_GEMM_TANH_INPLACE = r'''On the CPU the epilogue's six ops each allocate and stream a new tensor. addmm (bias folded into the GEMM), then
the epilogue in place on the GEMM's output: no extra allocations, half the memory traffic. The last clamp
is a no-op on tanh's range and NaN passes tanh.

```python
import torch


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        y.mul_(torch.sigmoid(y))          # swish
        y.mul_(0.5)                       # / 2.0 (exact)
        y.clamp_(-1.0, 1.0)
        return y.tanh_()
```
'''

CPU_GEMM_TANH_BROKEN = r'''Fewer passes: swish as one fused op instead of sigmoid and a multiply.

```python
import torch


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        y = torch.swish(y)
        y.mul_(0.5).clamp_(-1.0, 1.0)
        return y.tanh_()
```
'''

CPU_GEMM_TANH_FIXED = r'''torch has no `swish`: it is `silu`, which has an in-place form.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        F.silu(y, inplace=True)           # swish
        y.mul_(0.5).clamp_(-1.0, 1.0)
        return y.tanh_()
```
'''

CPU_GELU_SOFTMAX = r'''Fold the bias into the GEMM (addmm), then GELU and the softmax over the last dimension (dim 1 of a 2-D tensor).

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.softmax(F.gelu(y), dim=-1)
```
'''

CPU_GELU_SOFTMAX_WRONG = r'''The erf in GELU is the costly part of the epilogue on the CPU; the tanh form is cheaper.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.softmax(F.gelu(y, approximate="tanh"), dim=-1)
```
'''

CPU_GELU_SOFTMAX_FIXED = r'''The reference's GELU is the exact (erf) one and the tanh form is outside the tolerance: back to the exact GELU.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias)
        return F.softmax(F.gelu(y), dim=1)
```
'''

CPU_GROUPNORM_NO_AFFINE = r'''GroupNorm on a 2-D tensor, then Hardtanh in place. The affine is the identity at initialisation, so plain
F.group_norm without weight and bias.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        gn = self.group_norm
        y = F.group_norm(y, gn.num_groups, eps=gn.eps)
        return y.clamp_(self.hardtanh.min_val, self.hardtanh.max_val)
```
'''

CPU_GROUPNORM_FIXED = r'''The weight and bias are parameters the trials perturb: pass them.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        gn = self.group_norm
        y = F.group_norm(y, gn.num_groups, gn.weight, gn.bias, gn.eps)
        return y.clamp_(self.hardtanh.min_val, self.hardtanh.max_val)
```
'''

CPU_GROUPNORM_HARDTANH_INPLACE = r'''Same math, with the hardtanh through its in-place functional form.

```python
import torch
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        gn, ht = self.group_norm, self.hardtanh
        y = F.group_norm(F.linear(x, self.gemm.weight, self.gemm.bias), gn.num_groups, gn.weight, gn.bias, gn.eps)
        return F.hardtanh(y, ht.min_val, ht.max_val, inplace=True)
```
'''

#: problem file stem -> target -> [(intent, expected gate outcome, reply text)], in the order they are sent
REPLIES: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": {
        "cuda": [("cuBLAS GEMM + one fused Triton epilogue", "accepted", GEMM_TANH_EPILOGUE),
                 ("3xTF32 Triton GEMM with the epilogue in-kernel, calling tl.tanh (no such function)", "rejected",
                  GEMM_TANH_TF32X3_BROKEN),
                 ("the same, tanh from libdevice", "accepted", GEMM_TANH_TF32X3_FIXED)],
        "cpu": [("addmm + in-place epilogue", "accepted", CPU_GEMM_TANH_INPLACE),
                ("torch.swish (no such function)", "rejected", CPU_GEMM_TANH_BROKEN),
                ("F.silu in place", "accepted", CPU_GEMM_TANH_FIXED)],
    },
    "99_Matmul_GELU_Softmax": {
        "cuda": [("cuBLAS GEMM + Triton row kernel (exact GELU + softmax)", "accepted", GELU_SOFTMAX_ROW),
                 ("3xTF32 Triton GEMM + row kernel with the sigmoid-form GELU (wrong: the reference's is exact)",
                  "rejected", GELU_SOFTMAX_TF32X3_WRONG),
                 ("3xTF32 Triton GEMM + row kernel with the exact GELU", "accepted", GELU_SOFTMAX_TF32X3_FIXED)],
        "cpu": [("addmm + GELU + softmax", "accepted", CPU_GELU_SOFTMAX),
                ("tanh-form GELU (wrong: the reference's is exact)", "rejected", CPU_GELU_SOFTMAX_WRONG),
                ("exact GELU again", "accepted", CPU_GELU_SOFTMAX_FIXED)],
    },
    "30_Gemm_GroupNorm_Hardtanh": {
        "cuda": [("cuBLAS GEMM + Triton GroupNorm/Hardtanh kernel without the affine (wrong on perturbed weights)",
                  "rejected", GROUPNORM_NO_AFFINE),
                 ("the kernel with the per-channel weight and bias", "accepted", GROUPNORM_FIXED),
                 ("3xTF32 Triton GEMM + the fixed GroupNorm/Hardtanh kernel", "accepted", GROUPNORM_TF32X3)],
        "cpu": [("F.group_norm without weight and bias (wrong on perturbed weights)", "rejected",
                 CPU_GROUPNORM_NO_AFFINE),
                ("F.group_norm with weight and bias", "accepted", CPU_GROUPNORM_FIXED),
                ("F.linear + F.group_norm + in-place hardtanh", "accepted", CPU_GROUPNORM_HARDTANH_INPLACE)],
    },
}
