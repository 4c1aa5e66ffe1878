import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Global average pool for all (sample, channel) pairs at once: one prefix sum over the
    flattened pooled tensor, then segment sums from differences at the segment ends."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.scale = scale
        self.maxpool = nn.MaxPool3d(kernel_size=maxpool_kernel_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.clamp_min = 0
        self.clamp_max = 1

    def forward(self, x):
        ct = self.conv_transpose
        ys = []
        for i in range(x.shape[0]):
            y = F.conv_transpose3d(x[i:i + 1], ct.weight, ct.bias, stride=ct.stride, padding=ct.padding)
            ys.append(F.max_pool3d(y * self.scale, self.maxpool.kernel_size))
        y = torch.cat(ys, dim=0)
        B, C = y.shape[:2]
        flat = y.reshape(-1)
        seg = flat.numel() // (B * C)
        cs = torch.cumsum(flat, dim=0)
        ends = cs[seg - 1::seg]
        starts = torch.cat([ends.new_zeros(1), ends[:-1]])
        means = ((ends - starts) / seg).view(B, C, 1, 1, 1)
        return torch.clamp(means, self.clamp_min, self.clamp_max)
