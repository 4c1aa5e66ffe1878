import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """conv3d, in-place hardswish, group_norm, spatial mean."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.conv(x)
        y = F.hardswish(y, inplace=True)
        y = self.group_norm(y)
        return y.mean(dim=[2, 3, 4])
