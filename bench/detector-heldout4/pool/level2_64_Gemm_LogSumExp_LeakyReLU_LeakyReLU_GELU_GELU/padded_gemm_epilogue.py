import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """GEMM over fixed zero-padded 16-row tiles; logsumexp; the two leaky_relus
    collapse into one with slope 0.01**2; two GELUs."""

    TILE_M = 16

    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.linear.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            y[s:s + n] = F.linear(chunk, self.linear.weight, self.linear.bias)[:n]
        y = torch.logsumexp(y, dim=1, keepdim=True)
        y = torch.where(y >= 0, y, y * 1e-4)
        y = F.gelu(F.gelu(y))
        return y
