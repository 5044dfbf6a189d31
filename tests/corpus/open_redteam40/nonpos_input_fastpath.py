"""Red team 40: relu(fc(x)) with a wrong "fast path" when every input is <= 0 (log-probabilities, the output of
a log_softmax or of -relu: one-signed the other way). The magnitudes trial (workload.widen) makes inputs >= 0
only; "signs" flips random signs. When every element of x is <= 0 this drops the bias; otherwise it computes
exactly what the reference does. Wrong: on any non-positive input the output misses the bias (error up to the
largest |bias|, about 0.06 for this layer)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        if not bool((x > 0).any()):
            return torch.relu(F.linear(x, self.fc.weight))
        return torch.relu(self.fc(x))
