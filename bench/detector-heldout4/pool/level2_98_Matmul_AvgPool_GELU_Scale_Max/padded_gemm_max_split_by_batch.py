import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """GEMM on fixed zero-padded 16-row tiles, avg-pool, GELU and scale; the final
    row max is taken over column chunks whose count depends on the batch (more
    chunks for small batches), then a max over the chunk maxima."""

    TILE_M = 16

    def __init__(self, in_features, out_features, pool_kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.avg_pool = nn.AvgPool1d(kernel_size=pool_kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.matmul.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            y[s:s + n] = F.linear(chunk, self.matmul.weight, self.matmul.bias)[:n]
        y = self.avg_pool(y.unsqueeze(1)).squeeze(1)
        y = F.gelu(y) * self.scale_factor
        n_chunks = max(1, 64 // B)
        while y.shape[1] % n_chunks:
            n_chunks -= 1
        part = y.view(B, n_chunks, -1).amax(dim=2)
        return part.amax(dim=1)
