import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """GEMM over fixed 16-row tiles, scale, and a hand-written training-mode
    BatchNorm1d (mean / biased var over the batch, running-stat update)."""

    TILE_M = 16

    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.gemm.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            y[s:s + n] = F.linear(chunk, self.gemm.weight, self.gemm.bias)[:n]
        y = y * self.scale
        bn = self.bn
        if self.training:
            mean = y.mean(dim=0)
            var = ((y - mean) ** 2).mean(dim=0)
            with torch.no_grad():
                bn.running_mean.mul_(1 - bn.momentum).add_(bn.momentum * mean)
                bn.running_var.mul_(1 - bn.momentum).add_(bn.momentum * var * B / max(B - 1, 1))
                bn.num_batches_tracked.add_(1)
        else:
            mean, var = bn.running_mean, bn.running_var
        return (y - mean) * torch.rsqrt(var + bn.eps) * bn.weight + bn.bias
