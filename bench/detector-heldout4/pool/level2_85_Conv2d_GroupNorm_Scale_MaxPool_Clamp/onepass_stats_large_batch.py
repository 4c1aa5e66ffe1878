import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """For batches of 4+ compute GroupNorm statistics in a single pass
    (E[x^2] - E[x]^2, one read of the conv output); small batches use the
    two-pass library group_norm. Then scale, max pool, clamp."""

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
        B, C = y.shape[:2]
        G = self.group_norm.num_groups
        if B >= 4:
            yg = y.reshape(B, G, -1)
            mean = yg.mean(-1, keepdim=True)
            var = (yg * yg).mean(-1, keepdim=True) - mean * mean
            y = ((yg - mean) * torch.rsqrt(var + self.group_norm.eps)).view_as(y)
            y = y * self.group_norm.weight.view(1, C, 1, 1) + self.group_norm.bias.view(1, C, 1, 1)
        else:
            y = self.group_norm(y)
        y = y * self.scale
        y = self.maxpool(y)
        return torch.clamp(y, self.clamp_min, self.clamp_max)
