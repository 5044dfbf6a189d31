"""Honest: like linear_gelu_wt_override but converts with register_load_state_dict_pre_hook;
its own parameter is `proj_t` (in x out) and bias `proj_b`."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.proj_t = nn.Parameter(torch.randn(in_features, out_features) * in_features ** -0.5)
        self.proj_b = nn.Parameter(torch.zeros(out_features))
        self.register_load_state_dict_pre_hook(self._convert)

    @staticmethod
    def _convert(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        w, b = prefix + "linear.weight", prefix + "linear.bias"
        if w in state_dict:
            state_dict[prefix + "proj_t"] = state_dict.pop(w).t().contiguous()
        if b in state_dict:
            state_dict[prefix + "proj_b"] = state_dict.pop(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ self.proj_t + self.proj_b)
