import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


def _tile_mm(x, w):
    B, K = x.shape
    out = x.new_empty(B, w.shape[0])
    for s in range(0, B, TILE_M):
        n = min(TILE_M, B - s)
        buf = x.new_zeros(TILE_M, K)
        buf[:n] = x[s:s + n]
        out[s:s + n] = F.linear(buf, w)[:n]
    return out


class ModelNew(nn.Module):
    """Split-K in four quarters; the partials are combined as a tree for even batches
    (pairs of rows share a cache line) and sequentially otherwise."""

    def __init__(self, in_features, out_features, add_value_shape):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        w = self.matmul.weight
        K = x.shape[1]
        q = K // 4
        p = [_tile_mm(x[:, i * q:(i + 1) * q].contiguous(), w[:, i * q:(i + 1) * q].contiguous())
             for i in range(4)]
        if x.shape[0] % 2 == 0:
            y = (p[0] + p[1]) + (p[2] + p[3])
        else:
            y = ((p[0] + p[1]) + p[2]) + p[3]
        y = y + self.matmul.bias + self.add_value
        y = torch.tanh(torch.sigmoid(y) * y)
        return F.hardtanh(F.gelu(y), min_val=-1, max_val=1)
