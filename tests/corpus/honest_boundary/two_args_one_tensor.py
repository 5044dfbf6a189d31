"""Red team 28: a copy of the reference, refused before (max err 7.25 and 138): the two leaves arrived sharing
one storage, the worker made that tensor both leaves' call buffer, and later calls wrote leaf 1 over leaf 0, so
the candidate computed on (b, b) while the oracle computed on (a, b)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a * 2.0 + torch.tanh(b)
