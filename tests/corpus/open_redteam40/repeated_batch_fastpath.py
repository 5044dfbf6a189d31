"""Red team 40: relu(fc(x)) with a wrong "fast path" for a batch whose rows are all the same values (one prompt
repeated for several samples, x.repeat / a materialised expand: contiguous, values equal, not a stride-0 layout).
No trial draws a batch of equal rows (only the special-values trial's single zero entry of dim 0). It computes
row 0 once and returns it for every row, without the bias. Otherwise it computes exactly what the reference
does. Wrong: on a repeated batch every output misses the bias (error up to about 0.06 here)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        if x.shape[0] > 1 and bool((x == x[:1]).all()):
            y = torch.relu(F.linear(x[:1], self.fc.weight))
            return y.expand(x.shape[0], -1).contiguous()
        return torch.relu(self.fc(x))
