import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        if x.shape[0] >= 4:
            y = self.conv(x)  # one batched conv once there is enough work
        else:
            y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0)
        var, mean = torch.var_mean(y, dim=(2, 3), keepdim=True, unbiased=False)
        return (y - mean) * torch.rsqrt(var + 1e-5) * (1.0 / self.divide_by)
