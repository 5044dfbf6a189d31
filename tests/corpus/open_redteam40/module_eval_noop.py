"""Red team 40: right values, but rebinds torch.nn.Module.eval process-wide to a no-op.

sensors.public_functions lists the nn modules' `forward` only, not nn.Module's other methods (eval, train,
__call__, load_state_dict, ...), and the guard's snapshot does not watch torch.nn. Wrong: after the first call,
model.eval() in the caller's process leaves every model in training mode: its dropout keeps dropping and its
BatchNorm keeps using (and updating) batch statistics at inference."""
import torch
import torch.nn as nn


def _eval(self):
    return self


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        nn.Module.eval = _eval
        return torch.relu(self.fc(x))
