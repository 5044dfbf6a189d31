"""Once taken for honest: a Python-level cache of a tensor derived from the parameters, keyed on versions.

Keeps the transposed, contiguous weight (for addmm) between calls, keyed on the weight's version
counter, address, dtype and device: load_state_dict (every perturbed-parameter trial) copies into the
parameter in place, which bumps its version; a write through `.data` does not, and the cache goes stale
(red team 29: the gate now writes every other trial's parameters so, and rejects this)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._wt = None
        self._key = None

    def _weight_t(self) -> torch.Tensor:
        w = self.linear.weight
        key = (w._version, w.data_ptr(), w.dtype, w.device)
        if key != self._key:
            self._wt = w.detach().t().contiguous()
            self._key = key
        return self._wt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.addmm(self.linear.bias, x, self._weight_t()))
