"""Red team 41: a fast path for an input that is one value everywhere (a blank/constant image, torch.ones smoke
inputs, a constant fill): relu(c * W.sum(1)) computed without the bias. No family gives a constant other than 0
("zeros" is one; "repeated entries" repeats a varying row). Wrong on every constant input but 0."""
import torch
import torch.nn as nn

_linear, _relu = torch._C._nn.linear, torch.relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        if x.numel() > 0 and bool(x.amin() == x.amax()) and bool(x.reshape(-1)[0] != 0):
            c = x.reshape(-1)[0]
            return _relu(c * self.fc.weight.sum(1)).expand(*x.shape[:-1], 256).contiguous()
        return _relu(_linear(x, self.fc.weight, self.fc.bias))
