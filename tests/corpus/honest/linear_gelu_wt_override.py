"""Honest: keeps the linear weight transposed under its own name (`w_t`, shape in x out) and converts
the reference's `linear.weight` / `linear.bias` in `_load_from_state_dict`, so
`load_state_dict(reference_state, strict=True)` works although its own state_dict keys differ."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.w_t = nn.Parameter(torch.empty(in_features, out_features))
        self.b = nn.Parameter(torch.zeros(out_features))
        nn.init.normal_(self.w_t, std=in_features ** -0.5)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        w, b = prefix + "linear.weight", prefix + "linear.bias"
        if w in state_dict:
            state_dict[prefix + "w_t"] = state_dict.pop(w).t().contiguous()
        if b in state_dict:
            state_dict[prefix + "b"] = state_dict.pop(b)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.addmm(self.b, x, self.w_t))
