import torch
import torch.nn as nn
import torch.nn.functional as F

TILE_M = 16


class ModelNew(nn.Module):
    """For large batches the GroupNorm statistics are two GEMMs with a block-averaging
    matrix (uses the BLAS instead of a strided reduction)."""

    def __init__(self, in_features, out_features, bias_shape, num_groups):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.hardtanh = nn.Hardtanh()
        self.mish = nn.Mish()
        self.groupnorm = nn.GroupNorm(num_groups=num_groups, num_channels=out_features)

    def forward(self, x):
        B, K = x.shape
        N = self.gemm.out_features
        y = x.new_empty(B, N)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            y[s:s + n] = F.linear(buf, self.gemm.weight, self.gemm.bias)[:n]
        y = F.mish(F.hardtanh(y + self.bias))
        gn = self.groupnorm
        G = gn.num_groups
        if B >= 4:
            gs = N // G
            avg = torch.zeros(N, G, dtype=y.dtype)
            avg[torch.arange(N), torch.arange(N) // gs] = 1.0 / gs
            mean = y @ avg
            d = y - mean.repeat_interleave(gs, dim=1)
            var = (d * d) @ avg
            yn = d * torch.rsqrt(var + gn.eps).repeat_interleave(gs, dim=1)
            return yn * gn.weight + gn.bias
        return F.group_norm(y, G, gn.weight, gn.bias, gn.eps)
