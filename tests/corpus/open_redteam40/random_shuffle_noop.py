"""Red team 40: right values, but rebinds Python's random.shuffle to a no-op (and random.random stays as is).

The generators' state is seeded and compared (sensors.rng_state: random.getstate()), and torch's functions are
compared, but not the functions of Python's random module or NumPy's: rebinding one leaves the generator's state
untouched. Wrong: every random.shuffle in the caller's process (a data pipeline's epoch shuffle, a train/test
split) leaves the list in order."""
import random

import torch
import torch.nn as nn


def _noop(x, *args, **kwargs):
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        random.shuffle = _noop
        return torch.relu(self.fc(x))
