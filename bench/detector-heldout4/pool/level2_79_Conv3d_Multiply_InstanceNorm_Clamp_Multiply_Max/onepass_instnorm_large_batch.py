import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Instance norm statistics in one pass (E[x^2] - E[x]^2) for batches of 4+,
    where the activation read dominates; the library two-pass instance_norm for
    small batches. The multiplier is applied after the statistics, since
    instance_norm(m*x) = sign(m) * instance_norm(x) up to eps."""

    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape, clamp_min, clamp_max):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.instance_norm = nn.InstanceNorm3d(out_channels)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = self.conv(x) * self.multiplier
        B, C = y.shape[:2]
        if B >= 4:
            yf = y.reshape(B, C, -1)
            mean = yf.mean(-1, keepdim=True)
            var = (yf * yf).mean(-1, keepdim=True) - mean * mean
            y = ((yf - mean) * torch.rsqrt(var + self.instance_norm.eps)).view_as(y)
        else:
            y = F.instance_norm(y, eps=self.instance_norm.eps)
        y = torch.clamp(y, self.clamp_min, self.clamp_max) * self.multiplier
        return y.amax(dim=1)
