import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Global average pool as a two-stage reduction: partial sums over spatial
    slabs, then a sum of the partials. Few samples -> more slabs per channel."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = F.gelu(self.conv(x))
        B, C, H, W = y.shape
        slabs = 8 if B < 4 else 1
        while H % slabs:
            slabs //= 2
        part = y.reshape(B, C, slabs, -1).sum(dim=3)
        return part.sum(dim=2) / (H * W)
