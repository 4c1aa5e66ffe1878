import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        if x.shape[0] <= 2:
            # latency-bound anyway: run the tiny batch in double precision
            y = F.conv2d(x.double(), self.conv.weight.double(), self.conv.bias.double())
            y = (y / self.divisor).float()
        else:
            y = self.conv(x) / self.divisor
        return F.leaky_relu(y, negative_slope=0.01)
