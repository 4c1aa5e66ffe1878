import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        B, K = x.shape
        out = x.new_empty(B, self.gemm.out_features)
        buf = x.new_zeros(TILE_M, K)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf.zero_()
            buf[:n] = x[s:s + n]
            y = F.linear(buf, self.gemm.weight, self.gemm.bias)
            out[s:s + n] = F.leaky_relu(y[:n] * self.multiplier, self.negative_slope)
        return out
