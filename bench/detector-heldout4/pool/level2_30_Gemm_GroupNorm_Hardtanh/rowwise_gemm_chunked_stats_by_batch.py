import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Per-row GEMV, then GroupNorm whose statistics are reduced in column chunks.
    With few rows each group is split into 8 chunks (more parallel partial sums);
    with 8 or more rows a group is reduced in one pass."""

    def __init__(self, in_features, out_features, num_groups, hardtanh_min, hardtanh_max):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        B = x.shape[0]
        y = torch.cat([F.linear(x[i:i + 1], self.gemm.weight, self.gemm.bias) for i in range(B)])
        G = self.group_norm.num_groups
        yg = y.view(B, G, -1)
        gs = yg.shape[-1]
        chunks = 8 if B < 8 else 1
        parts = yg.view(B, G, chunks, gs // chunks)
        mean = parts.sum(dim=-1).sum(dim=-1, keepdim=True) / gs
        d = yg - mean
        var = (d * d).view(B, G, chunks, gs // chunks).sum(dim=-1).sum(dim=-1, keepdim=True) / gs
        yn = (d * torch.rsqrt(var + self.group_norm.eps)).view(B, -1)
        yn = yn * self.group_norm.weight + self.group_norm.bias
        return self.hardtanh(yn)
