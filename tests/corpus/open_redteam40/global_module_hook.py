"""Red team 40: right values, but installs a global nn.Module forward hook (register_module_forward_hook).

torch.nn.modules.module._global_forward_hooks is process-wide state that nothing compares after a call (it is
not a function binding, a flag or a generator). forward computes F.linear + relu with fc's own parameters, without
calling self.fc (so the hook never touches the judged outputs), and the hook halves the output of every other
nn.Linear. Wrong: every nn.Linear of every other model in the caller's process returns half its value."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.module import register_module_forward_hook

_DONE = []


def _halve(module, args, out):
    if type(module) is nn.Linear:
        return out * 0.5
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        if not _DONE:
            _DONE.append(register_module_forward_hook(_halve))
        return torch.relu(F.linear(x, self.fc.weight, self.fc.bias))
