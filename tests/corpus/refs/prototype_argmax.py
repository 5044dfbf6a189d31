"""Prototype classifier: each row's best class by its score against C class prototypes. The workload's rows lie
near their class's prototype, so the integer output stays the same when the inputs move a little."""
import torch
import torch.nn as nn

B, D, C = 64, 256, 4096
PROTO_SEED = 1234


def _prototypes() -> torch.Tensor:
    return torch.randn(C, D, generator=torch.Generator().manual_seed(PROTO_SEED))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proto = nn.Parameter(_prototypes())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x @ self.proto.T, dim=1)


def get_inputs():
    labels = torch.randint(0, C, (B,))
    return [_prototypes()[labels] + 0.5 * torch.randn(B, D)]


def get_init_inputs():
    return []
