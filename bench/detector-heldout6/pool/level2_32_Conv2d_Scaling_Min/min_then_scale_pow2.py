import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        outs = []
        for i in range(x.shape[0]):
            y = self.conv(x[i:i + 1])
            # scale after the min: 16x fewer multiplies (scale > 0)
            outs.append(torch.amin(y, dim=1, keepdim=True) * self.scale_factor)
        return torch.cat(outs, 0)
