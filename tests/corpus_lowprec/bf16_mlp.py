"""bf16 MLP block: Linear -> GELU -> Linear, parameters and activations in bf16."""
import torch
import torch.nn as nn

B, D, H = 64, 256, 512


class Model(nn.Module):
    def __init__(self, d: int = D, hidden: int = H):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def get_inputs():
    return [torch.randn(B, D).to(torch.bfloat16)]


def get_init_inputs():
    return [D, H]
