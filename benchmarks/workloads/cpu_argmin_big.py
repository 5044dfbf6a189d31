import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim
    def forward(self, x):
        return torch.argmin(x, dim=self.dim)

def get_inputs():
    return [torch.randn(128, 1024, 1024)]

def get_init_inputs():
    return [1]
