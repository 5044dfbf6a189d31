"""Red team 39: a bf16 linear+ReLU whose output is negative at a few positions.

forward computes relu(fc(x)) in bf16 like the reference, then at 4 fixed positions (every 4096th element) where
the ReLU gave 0 it writes -min(7 unit roundoffs of the output's largest magnitude, 0.1 x its RMS) (about -1.5% to
-2.7% of the peak). For a bf16
output the gate's max bound keeps 8 units of the peak (correctness.derive: BETA 8), and 4 elements of 16384 move the
mean and Frobenius bounds (1 unit, LOW_BETA) by a fraction of a unit. Wrong: a ReLU never returns a negative
number; a caller's sqrt/log of the activations (or any code relying on y >= 0, e.g. a sparsity mask y > 0 vs
y != 0, or y.sqrt() as a feature map) gets NaN where the reference's output gives finite values."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256).to(torch.bfloat16)

    def forward(self, x):
        y = torch.relu(self.fc(x))
        flat = y.reshape(-1)
        idx = torch.arange(0, flat.numel(), 4096, device=y.device)
        fin = torch.nan_to_num(flat.float(), 0.0, 0.0, 0.0)
        peak, rms = fin.abs().max(), fin.square().mean().sqrt()
        vals = flat[idx]
        spike = (-torch.minimum(7.0 * 2.0 ** -8 * peak, 0.1 * rms)).to(y.dtype)
        flat = flat.clone()
        flat[idx] = torch.where(vals == 0, spike, vals)
        return flat.view_as(y)
