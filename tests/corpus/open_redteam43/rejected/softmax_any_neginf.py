"""Rejected idea: the padmask bug keyed on any -inf in a row (not a tail run). Row softmax with a "padding-mask" fast path: a row whose tail is a run of >= 4 -inf (an attention padding mask,
as `scores.masked_fill(~mask, -inf)` makes) is taken to hold n valid leading scores and only those are
normalised -- with an off-by-one, n-1 of them, so the last valid key gets probability 0 and the others are
inflated. The gate's NaN/Inf trial scatters NaN/+-Inf at a few random positions, never a contiguous -inf tail."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.softmax(x, dim=-1)
        if x.dim() == 2 and x.shape[1] >= 8:
            tail = torch.isneginf(x).any(1)
            if bool(tail.any()):
                rows = tail.nonzero().flatten()
                for r in rows.tolist():
                    row = x[r]
                    fin = ~torch.isneginf(row)
                    n = int(fin.nonzero().max()) + 1 if bool(fin.any()) else 0
                    if n >= 2:
                        p = torch.zeros_like(row)
                        p[:n - 1] = torch.softmax(row[:n - 1], 0)       # off by one: drops key n-1
                        out[r] = p
        return out
