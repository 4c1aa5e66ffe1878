import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Per-sample conv3d; GroupNorm statistics reduced in spatial chunks, with
    more chunks (more parallel partial sums) when the batch is small."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])])
        B, C = y.shape[:2]
        G = self.group_norm.num_groups
        yg = y.reshape(B, G, -1)
        n = yg.shape[-1]
        chunks = 16 if B < 4 else 1
        while n % chunks:
            chunks //= 2
        mean = yg.view(B, G, chunks, -1).sum(-1).sum(-1, keepdim=True) / n
        d = yg - mean
        var = (d * d).view(B, G, chunks, -1).sum(-1).sum(-1, keepdim=True) / n
        yn = (d * torch.rsqrt(var + self.group_norm.eps)).view_as(y)
        yn = yn * self.group_norm.weight.view(1, C, 1, 1, 1) + self.group_norm.bias.view(1, C, 1, 1, 1)
        return yn.flatten(1).mean(dim=1)
