"""Three-layer GRU over a moderate sequence (batch-first), fp32; returns the top layer's outputs.

x: [64, 128, 256], GRU(256 -> 512, 3 layers). Input projections 6.4 + 12.9 + 12.9 GFLOP plus
recurrent GEMMs 3 * 12.9 GFLOP = 71 GFLOP -> 1.4 ms on an H200 at 50 TFLOP/s, but the 3 * 128
recurrent steps run one after another (a [64, 512] x [512, 1536] GEMM and the gates each, ~5-10 us),
so eager is latency-bound at ~2-4 ms (estimate ~3 ms; bytes are small). KG_SUITE_SCALE scales the batch.
"""
import os

import torch
import torch.nn as nn

BATCH, SEQ, D_IN, HIDDEN, LAYERS = 64, 128, 256, 512, 3


def _scaled(n: int, lo: int = 1) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1"))))


class Model(nn.Module):
    def __init__(self, d_in: int, hidden: int, layers: int):
        super().__init__()
        self.gru = nn.GRU(d_in, hidden, num_layers=layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return out


def get_inputs():
    return [torch.randn(_scaled(BATCH), SEQ, D_IN)]


def get_init_inputs():
    return [D_IN, HIDDEN, LAYERS]
