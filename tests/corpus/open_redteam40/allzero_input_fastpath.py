"""Red team 40: relu(fc(x)) with a wrong "fast path" for an all-zero input (a zero-initialised hidden state h0,
an all-padding batch, a zeroed residual at step 0): it returns zeros, as if relu(W 0) were all there is, and
forgets relu(bias). Special values zero one entry of the first dimension, never the whole input; no trial's
input is all zeros. Otherwise it computes exactly what the reference does. Wrong: on x = 0 the reference gives
relu(bias) (up to about 0.06 here), this gives 0."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        if not bool(x.any()):
            return torch.zeros(x.shape[:-1] + (256,), dtype=x.dtype, device=x.device)
        return torch.relu(self.fc(x))
