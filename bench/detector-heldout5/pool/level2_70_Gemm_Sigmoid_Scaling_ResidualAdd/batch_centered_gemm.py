import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


def _tile_linear(x, w, b=None):
    B, K = x.shape
    out = x.new_empty(B, w.shape[0])
    for s in range(0, B, TILE_M):
        n = min(TILE_M, B - s)
        buf = x.new_zeros(TILE_M, K)
        buf[:n] = x[s:s + n]
        out[s:s + n] = F.linear(buf, w, b)[:n]
    return out


class ModelNew(nn.Module):
    """Centres the (all-positive) inputs before the GEMM for a better-conditioned
    accumulation: W x + b = W (x - mu) + (W mu + b), mu = mean over the batch."""

    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        mu = x.mean(dim=0, keepdim=True)
        shift = F.linear(mu, self.gemm.weight, self.gemm.bias)
        y = _tile_linear(x - mu, self.gemm.weight) + shift
        return torch.sigmoid(y) * self.scaling_factor + y
