import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """conv2d, group_norm with the extra scale folded into its affine weight, max
    pool and clamp."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups, scale_shape, maxpool_kernel_size,
                 clamp_min, clamp_max):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = self.conv(x)
        s = self.scale.view(-1)
        y = F.group_norm(y, self.group_norm.num_groups, self.group_norm.weight * s, self.group_norm.bias * s,
                         self.group_norm.eps)
        y = self.maxpool(y)
        return torch.clamp(y, self.clamp_min, self.clamp_max)
