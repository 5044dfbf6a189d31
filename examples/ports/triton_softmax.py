"""A row softmax written as a Triton kernel (one program per row, the row in one block): a kernel
implementation to port (`kernelgate port examples/ports/triton_softmax.py --to pallas --target cuda`).
On a CPU it runs in Triton's interpreter (TRITON_INTERPRET=1)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class Model(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out


def get_inputs():
    return [torch.randn(256, 1000)]


def get_init_inputs():
    return []
