import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        w, b = self.conv.weight, self.conv.bias
        if x.shape[0] < 8:
            # small batch: split the input-channel reduction in two halves so the two
            # partial convolutions can run concurrently, then add them
            h = x.shape[1] // 2
            y = F.conv2d(x[:, :h], w[:, :h]) + F.conv2d(x[:, h:], w[:, h:], b)
        else:
            y = F.conv2d(x, w, b)
        y = torch.relu(y)
        return y * torch.clamp((y + 3) / 6, 0, 1)
