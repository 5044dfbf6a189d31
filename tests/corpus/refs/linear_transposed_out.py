"""Linear (256 -> 128) on a batch of 64, returned transposed: the output is a (128, 64) view with strides
(1, 128), not a contiguous tensor."""
import torch
import torch.nn as nn

batch_size = 64
in_features = 256
out_features = 128


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).t()


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
