"""Four pre-LayerNorm transformer blocks (attention written out by hand, GELU MLP) and a final
LayerNorm, fp32.

x: [16, 512, 512] (batch, sequence, d_model), 8 heads of 64, MLP 512 -> 2048 -> 512.
Per block: QKV 12.9 + output projection 4.3 + MLP 34.4 + attention matmuls 8.6 = 60 GFLOP;
4 blocks: 240 GFLOP -> ~4.8 ms on an H200 at 50 TFLOP/s. Bytes: the [16, 8, 512, 512] scores
(134 MB, 6 passes), head reshapes, LayerNorms, residuals and GELU: ~1.5 GB per block, ~6 GB ->
~1.5 ms. Eager ~6.3 ms. KG_SUITE_SCALE scales batch and sequence by its square root.
"""
import math
import os

import torch
import torch.nn as nn

BATCH, SEQ, D_MODEL, HEADS, BLOCKS = 16, 512, 512, 8, 4


def _scaled(n: int, lo: int = 1, power: float = 1.0) -> int:
    return max(lo, round(n * float(os.environ.get("KG_SUITE_SCALE", "1")) ** power))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape[0], x.shape[1], x.shape[2]
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        a = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, d_model: int, heads: int, blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(blocks))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


def get_inputs():
    return [torch.randn(_scaled(BATCH, 1, 0.5), _scaled(SEQ, 8, 0.5), D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HEADS, BLOCKS]
