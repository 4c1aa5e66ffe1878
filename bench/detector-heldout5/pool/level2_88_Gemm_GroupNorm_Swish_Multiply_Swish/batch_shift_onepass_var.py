import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


class ModelNew(nn.Module):
    """One-pass GroupNorm statistics with a shift (shifted-data variance) to avoid
    cancellation; the shift is the mean of the whole GEMM output."""

    def __init__(self, in_features, out_features, num_groups, multiply_weight_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiply_weight = nn.Parameter(torch.randn(multiply_weight_shape))

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.gemm.out_features)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            y[s:s + n] = F.linear(buf, self.gemm.weight, self.gemm.bias)[:n]
        G = self.group_norm.num_groups
        shift = y.mean()
        yg = (y - shift).view(B, G, -1)
        m1 = yg.mean(dim=2, keepdim=True)
        m2 = (yg * yg).mean(dim=2, keepdim=True)
        var = (m2 - m1 * m1).clamp_min(0.0)
        yn = ((yg - m1) * torch.rsqrt(var + self.group_norm.eps)).view(B, -1)
        yn = yn * self.group_norm.weight + self.group_norm.bias
        yn = yn * torch.sigmoid(yn) * self.multiply_weight
        return yn * torch.sigmoid(yn)
