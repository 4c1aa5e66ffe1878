import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        # relu(y) / d == relu(y / d) for d > 0: fold 1/d into the weights
        w = self.linear.weight / self.divisor
        b = self.linear.bias / self.divisor
        B, K = x.shape
        out = x.new_empty(B, w.shape[0])
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            out[s:s + n] = torch.relu(F.linear(buf, w, b)[:n])
        return out
