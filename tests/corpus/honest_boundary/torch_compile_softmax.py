"""Honest, unusual: torch.compile (inductor), compiled lazily at the first call.

A softmax through torch.compile with the default backend: the first forward (a correctness trial, after
the build) traces, generates C++ (CPU) or Triton (GPU) code and compiles it, which starts compiler
processes and torch's own worker threads. A gate that forbids new processes or threads after the build
must still let torch compile; this is what most candidates look like."""
import torch
import torch.nn as nn


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


_compiled = torch.compile(_softmax)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _compiled(x)
