"""A detector's box head for one image (batch dimension 1, as the detector's heads return): each box (x0, y0, x1,
y1, normalised to [0, 1]) is pooled from the feature map by bilinear sampling on an S x S grid (RoIAlign through
grid_sample), then an MLP head gives its features. Padding proposals (empty boxes: x1 <= x0 or y1 <= y0) enter
the head as an all-zero RoI feature. Every proposal the workload draws is a real box. Returns (1, N, HID)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

C, H, W, N, S, HID = 32, 32, 32, 192, 7, 384


def roi_grid(boxes: torch.Tensor) -> torch.Tensor:
    x0, y0, x1, y1 = boxes.unbind(-1)
    lin = torch.linspace(-1.0, 1.0, S, dtype=boxes.dtype, device=boxes.device)
    gx = (x0 + x1 - 1)[:, None] + (x1 - x0)[:, None] * lin[None, :]          # (N, S) in [-1, 1] coords
    gy = (y0 + y1 - 1)[:, None] + (y1 - y0)[:, None] * lin[None, :]
    grid = torch.stack(torch.broadcast_tensors(gx[:, None, :], gy[:, :, None]), dim=-1)   # (N, S, S, 2)
    return grid.reshape(1, -1, S, 2)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(C * S * S, HID)
        self.fc2 = nn.Linear(HID, HID)

    def forward(self, feat: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        pooled = F.grid_sample(feat, roi_grid(boxes), align_corners=False)             # (1, C, N*S, S)
        pooled = pooled.reshape(C, -1, S, S).transpose(0, 1).reshape(boxes.shape[0], -1)
        valid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        pooled = pooled * valid[:, None].to(pooled.dtype)                           # padding: a zero RoI feature
        return self.fc2(F.relu(self.fc1(pooled))).unsqueeze(0)


def get_inputs():
    xy0 = torch.rand(N, 2) * 0.6
    wh = 0.1 + torch.rand(N, 2) * 0.3
    return [torch.randn(1, C, H, W), torch.cat([xy0, xy0 + wh], dim=1)]


def get_init_inputs():
    return []
