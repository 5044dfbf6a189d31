"""Sequence encoder pooling over a padded batch: a per-token MLP, then the mean over each sequence's valid tokens.
Lengths are long-tailed, as in real traffic: most sequences fill (nearly) the whole window, a few are short
(length = ceil(L * (1 - u^4)), u uniform: mean fill 4/5)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, L, D, HID = 32, 64, 64, 1536


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, HID)
        self.fc2 = nn.Linear(HID, D)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.gelu(self.fc1(x)))                                     # (B, L, D)
        valid = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]     # (B, L)
        h = h.masked_fill(~valid[..., None], 0.0)
        return h.sum(1) / valid.to(h.dtype).sum(1, keepdim=True).clamp(min=1)


def get_inputs():
    u = torch.rand(B)
    lengths = (L * (1 - u ** 4)).ceil().long().clamp(1, L)
    return [torch.randn(B, L, D), lengths]


def get_init_inputs():
    return []
