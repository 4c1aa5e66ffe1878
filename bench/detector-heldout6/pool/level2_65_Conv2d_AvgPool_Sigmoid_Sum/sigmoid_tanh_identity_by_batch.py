import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x):
        B = x.shape[0]
        out = torch.empty((B,), device=x.device, dtype=x.dtype)
        for i in range(B):
            p = self.avg_pool(self.conv(x[i:i + 1]))
            # tanh form of the sigmoid vectorises better for large batches
            s = 0.5 * (1.0 + torch.tanh(0.5 * p)) if B >= 8 else torch.sigmoid(p)
            out[i] = s.sum()
        return out
