import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract_value_1, subtract_value_2):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value_1 = subtract_value_1
        self.subtract_value_2 = subtract_value_2

    def forward(self, x):
        # oneDNN setup cost dominates for many tiny per-image convs: turn it off for big batches
        with torch.backends.mkldnn.flags(enabled=x.shape[0] < 8):
            y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0)
        return F.mish(y - (self.subtract_value_1 + self.subtract_value_2))
