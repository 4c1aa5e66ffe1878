import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """GEMM on fixed 16-row tiles (the last tile zero-padded) so every GEMM call has
    the same shape; scale and x + x fold into one multiply by 2*scale; then
    clamp, row logsumexp and x * mish(x)."""

    TILE_M = 16

    def __init__(self, input_size, hidden_size, scale_factor, clamp_min, clamp_max):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(input_size, hidden_size)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def _gemm(self, x):
        B, K = x.shape
        out = x.new_empty(B, self.matmul.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            out[s:s + n] = F.linear(chunk, self.matmul.weight, self.matmul.bias)[:n]
        return out

    def forward(self, x):
        y = self._gemm(x)
        y = y * (self.scale_factor * 2.0)
        y = torch.clamp(y, self.clamp_min, self.clamp_max)
        y = torch.logsumexp(y, dim=1, keepdim=True)
        return y * F.mish(y)
