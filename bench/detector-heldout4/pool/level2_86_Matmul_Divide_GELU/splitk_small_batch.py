import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Below 8 rows the GEMM is a GEMV: split K in two halves and add the partial
    products (two shorter dot products per row). From 8 rows on, one GEMM over
    fixed zero-padded 16-row tiles."""

    TILE_M = 16

    def __init__(self, input_size, output_size, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        B, K = x.shape
        W, b = self.linear.weight, self.linear.bias
        if B < 8:
            h = K // 2
            y = torch.cat([F.linear(x[i:i + 1, :h], W[:, :h]) + F.linear(x[i:i + 1, h:], W[:, h:]) + b
                           for i in range(B)])
        else:
            y = x.new_empty(B, W.shape[0])
            for s in range(0, B, self.TILE_M):
                chunk = x[s:s + self.TILE_M]
                n = chunk.shape[0]
                if n < self.TILE_M:
                    chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
                y[s:s + n] = F.linear(chunk, W, b)[:n]
        return F.gelu(y / self.divisor)
