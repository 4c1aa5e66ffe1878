import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """conv2d, GELU, and the global average pool as a mean over H and W."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = F.gelu(self.conv(x))
        return y.mean(dim=(2, 3))
