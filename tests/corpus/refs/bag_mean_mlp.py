"""Bag-of-tokens encoder: token embeddings through a per-token MLP, mean over the sequence."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, L, V, D, HID = 8, 256, 512, 256, 640


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.fc1 = nn.Linear(D, HID)
        self.fc2 = nn.Linear(HID, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(self.emb(ids)))).mean(1)


def get_inputs():
    return [torch.randint(0, V, (B, L))]


def get_init_inputs():
    return []
