import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """GEMM over fixed zero-padded 16-row tiles, then group_norm, leaky_relu and
    x + x folded into a multiply by 2."""

    TILE_M = 16

    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        super(ModelNew, self).__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=hidden_size, eps=eps)
        self.leaky_relu = nn.LeakyReLU(negative_slope=negative_slope)

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.fc.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            y[s:s + n] = F.linear(chunk, self.fc.weight, self.fc.bias)[:n]
        y = self.gn(y)
        y = self.leaky_relu(y)
        return y * 2.0
