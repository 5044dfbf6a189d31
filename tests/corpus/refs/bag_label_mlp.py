"""Class-conditional bag-of-tokens head: each sample's tokens (a ragged batch given as flat ids + lengths) are
mean-pooled from an embedding table; the sample's class label goes through an MLP (a label embedder); both are
added to an MLP of the dense features."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, V, NC, D, E, H = 64, 1024, 5000, 1000, 256, 512, 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.cls = nn.Embedding(NC, E)
        self.c1 = nn.Linear(E, H)
        self.c2 = nn.Linear(H, H)
        self.c3 = nn.Linear(H, D)
        self.d1 = nn.Linear(D, H)
        self.d2 = nn.Linear(H, H)
        self.d3 = nn.Linear(H, D)

    def forward(self, x, idx, lengths, labels):
        seg = torch.repeat_interleave(torch.arange(lengths.numel()), lengths, output_size=idx.numel())
        e = self.tok(idx)
        pooled = torch.zeros(lengths.numel(), D, dtype=e.dtype).index_add_(0, seg, e) / lengths[:, None]
        c = self.c3(F.silu(self.c2(F.silu(self.c1(self.cls(labels))))))
        return self.d3(F.silu(self.d2(F.silu(self.d1(x))))) + pooled + c


def get_inputs():
    cuts = torch.sort(torch.randperm(T - 1)[:B - 1] + 1).values
    bounds = torch.cat([torch.tensor([0]), cuts, torch.tensor([T])])
    lengths = bounds[1:] - bounds[:-1]
    return [torch.randn(B, D), torch.randint(0, V, (T,)), lengths, torch.randint(0, NC, (B,))]


def get_init_inputs():
    return []
