import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        xc = self.conv(x)
        B, C, H, W = xc.shape
        G = self.group_norm.num_groups
        xg = xc.reshape(B, G, -1)
        n = xg.shape[2]
        # partial-sum count per group chosen so B*G*parts >= 256 work items
        parts = max(1, 256 // (B * G))
        while n % parts:
            parts -= 1
        xs = xg.view(B, G, parts, n // parts)
        mean = xs.sum(-1).sum(-1) / n
        var = ((xs - mean[..., None, None]) ** 2).sum(-1).sum(-1) / n
        xn = ((xg - mean[..., None]) * torch.rsqrt(var + self.group_norm.eps)[..., None]).view(B, C, H, W)
        xn = xn * self.group_norm.weight.view(1, C, 1, 1) + self.group_norm.bias.view(1, C, 1, 1)
        y = xc + F.hardswish(torch.tanh(xn))
        return torch.logsumexp(y, dim=1, keepdim=True)
