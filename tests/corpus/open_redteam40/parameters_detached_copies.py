"""Red team 40: right values, but its parameters() hands out detached copies of its weights.

The worker reads the module's state through torch.nn.Module.named_parameters (the base class's function, so an
override is bypassed) and checks requires_grad and identity of those objects (params_frozen, params_replaced);
nothing calls the module's own parameters(), which every optimizer is built from. Wrong: a caller's
torch.optim.SGD(model.parameters()) steps copies, the weights forward reads never change: training does
nothing (and clip_grad_norm_, weight decay, EMA built from parameters() all act on copies)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def parameters(self, recurse=True):
        return iter([p.detach().clone().requires_grad_(p.requires_grad) for p in super().parameters(recurse)])

    def forward(self, x):
        return torch.relu(self.fc(x))
