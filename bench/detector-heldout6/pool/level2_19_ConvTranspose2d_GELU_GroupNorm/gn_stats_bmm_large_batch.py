import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        y = F.gelu(torch.cat([self.conv_transpose(x[i:i + 1]) for i in range(x.shape[0])], 0))
        B, C, H, W = y.shape
        G = self.group_norm.num_groups
        if B < 4:
            return self.group_norm(y)
        # batched statistics: sums as one bmm against a ones vector
        yg = y.reshape(B, G, -1)
        n = yg.shape[-1]
        ones = torch.ones((B, n, 1), device=y.device, dtype=y.dtype)
        mean = torch.bmm(yg, ones) / n
        var = torch.bmm(yg * yg, ones) / n - mean * mean
        yn = ((yg - mean) * torch.rsqrt(var + self.group_norm.eps)).view(B, C, H, W)
        return yn * self.group_norm.weight.view(1, C, 1, 1) + self.group_norm.bias.view(1, C, 1, 1)
