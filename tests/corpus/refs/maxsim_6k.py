"""Best-match similarity: each query row's highest score against a bank of C stored prototypes (the value
only, as a retrieval confidence)."""
import torch
import torch.nn as nn

B, D, C = 64, 256, 6144
PROTO_SEED = 1234


def _prototypes() -> torch.Tensor:
    return torch.randn(C, D, generator=torch.Generator().manual_seed(PROTO_SEED))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proto = nn.Parameter(_prototypes())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.proto.T).amax(dim=1)


def get_inputs():
    labels = torch.randint(0, C, (B,))
    return [_prototypes()[labels] + 0.5 * torch.randn(B, D)]


def get_init_inputs():
    return []
