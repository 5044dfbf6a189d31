"""The same four-layer MLP as bench_mlp.py, in a file of its own: the target of the bytecode-poisoning case
(exploits_boundary/poison_ref_pyc_bench.py plants a __pycache__ entry for it), so no other case can
import a poisoned reference if a run is interrupted before the runner removes the planted file."""
import torch
import torch.nn as nn

batch_size = 384
features = 512


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(features, features) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
