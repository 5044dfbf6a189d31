"""tanh(x @ w) where x sits in a dict keyed by a (level, name) tuple."""
import torch
import torch.nn as nn

M, K = 512, 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(K, K) / K ** 0.5)

    def forward(self, feats):
        x = feats[(0, "x")]
        return torch.tanh(x @ self.w.to(x.dtype))


def get_inputs():
    return [{(0, "x"): torch.randn(M, K)}]


def get_init_inputs():
    return []
