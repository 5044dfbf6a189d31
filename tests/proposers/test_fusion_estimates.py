"""The strategy side of the fusion estimates: what each generated-kernel strategy fuses in a workload."""
import torch

from kernelgate.proposers.library.fusion_estimates import strategy_fusions
from kernelgate.proposers.library.library import PRIORS


def test_strategy_fusions_count_what_each_generated_kernel_strategy_fuses():
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 128)
            self.scale = torch.nn.Parameter(torch.ones(128))

        def forward(self, x):
            y = torch.nn.functional.gelu(self.lin(x))      # GEMM feeding a group of 3 pointwise ops
            y = y * self.scale + 1.0
            z = torch.sigmoid(x) * x                        # a second group, not fed by a GEMM
            return y, z

    f = strategy_fusions(Chain().eval(), [torch.randn(32, 64)])
    assert f["triton:pointwise"].launches_removed == 3                 # (gelu, mul, add) + (sigmoid, mul)
    assert f["triton:pointwise"].intermediate_bytes == (2 * 32 * 128 + 32 * 64) * 4
    assert f["triton:gemm-epilogue"].intermediate_bytes == 2 * 32 * 128 * 4
    gemm = f["triton:gemm"]
    assert gemm.intermediate_bytes == 3 * 32 * 128 * 4 and gemm.launches_removed == 3

    class Lone(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1)
    assert strategy_fusions(Lone(), [torch.randn(4, 8)]) == {}
    assert set(f) <= set(PRIORS)                                      # the library's own strategy names
