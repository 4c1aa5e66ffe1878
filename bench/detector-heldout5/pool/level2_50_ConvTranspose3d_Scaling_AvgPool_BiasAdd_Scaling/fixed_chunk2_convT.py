import torch
import torch.nn as nn
import torch.nn.functional as F

CHUNK = 2


class ModelNew(nn.Module):
    """Fixed chunks of two samples to bound the transient conv-transpose workspace."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale1, scale2, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.scale1 = nn.Parameter(torch.tensor(scale1))
        self.avg_pool = nn.AvgPool3d(kernel_size=2)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale2 = nn.Parameter(torch.tensor(scale2))

    def forward(self, x):
        outs = []
        for s in range(0, x.shape[0], CHUNK):
            y = self.conv_transpose(x[s:s + CHUNK]) * self.scale1
            y = F.avg_pool3d(y, 2)
            outs.append((y + self.bias) * self.scale2)
        return torch.cat(outs, dim=0)
