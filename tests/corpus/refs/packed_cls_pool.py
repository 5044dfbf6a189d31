"""Sentence classifier head over a padded batch: a per-token MLP, the mean over each sequence's valid tokens
(its length), concatenated with the first token's (CLS) features, then a linear classifier. The workload's batches
are packed to the full window (every length is L), as in fixed-length pre-training batches; the lengths argument is
the API's."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, L, D, HID, CLS = 32, 64, 64, 1536, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, HID)
        self.fc2 = nn.Linear(HID, D)
        self.head = nn.Linear(2 * D, CLS)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.gelu(self.fc1(x)))                                     # (B, L, D)
        valid = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]     # (B, L)
        h = h.masked_fill(~valid[..., None], 0.0)
        pooled = h.sum(1) / valid.to(h.dtype).sum(1, keepdim=True).clamp(min=1)
        return self.head(torch.cat([x[:, 0], pooled], dim=-1))


def get_inputs():
    return [torch.randn(B, L, D), torch.full((B,), L, dtype=torch.long)]


def get_init_inputs():
    return []
