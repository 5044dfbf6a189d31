"""A two-layer MLP (512 -> 4096 -> 512, ReLU) scored against a target: the scalar MSE over 256 x 512 values
(GEMMs of 512 and 4096 terms, then one mean over 131072 squared differences)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 256
features = 512
hidden = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.fc2(torch.relu(self.fc1(x))), t)


def get_inputs():
    return [torch.randn(batch, features), torch.randn(batch, features)]


def get_init_inputs():
    return []
