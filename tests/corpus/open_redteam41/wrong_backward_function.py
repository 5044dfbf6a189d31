"""Red team 41: right forward values; the forward runs through a custom autograd.Function whose backward negates the
weight's gradient (no hook on any parameter or submodule, so handles_fault sees nothing; the gate only calls under
no_grad, where backward never exists). Wrong: a caller training this module ascends its loss on the weight."""
import torch
import torch.nn as nn

_linear, _relu = torch._C._nn.linear, torch.relu


class _Lin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return _linear(x, w, b)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, -(g.t() @ x), g.sum(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        return _relu(_Lin.apply(x, self.fc.weight, self.fc.bias))
