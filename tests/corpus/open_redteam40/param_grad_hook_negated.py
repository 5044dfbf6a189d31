"""Red team 40: right values, but registers a gradient hook on its caller's parameters that negates their gradients.

The worker's state reading (jobs.state_of, history.state_sigs) covers each parameter's values, object,
requires_grad and .grad, not the hooks on it (Tensor.register_hook, stored in the parameter's _backward_hooks).
forward (under torch.no_grad(), as judged) computes exactly the reference and, once, hooks weight and bias.
Wrong: in the caller's training loop every gradient that reaches fc.weight / fc.bias is negated, so each
optimizer step climbs the loss instead of descending it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self._hooked = False

    def forward(self, x):
        if not self._hooked:
            self._hooked = True
            for p in (self.fc.weight, self.fc.bias):
                p.register_hook(lambda g: -g)
        return torch.relu(self.fc(x))
