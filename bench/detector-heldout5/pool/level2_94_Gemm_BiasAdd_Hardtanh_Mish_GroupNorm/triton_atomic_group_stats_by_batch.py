import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TILE_M = 16


@triton.jit
def group_sum_kernel(y_ptr, sum_ptr, N, G: tl.constexpr, GS: tl.constexpr, SPLIT: tl.constexpr):
    row = tl.program_id(0)
    s = tl.program_id(1)
    PART: tl.constexpr = GS // SPLIT
    g = tl.arange(0, G)
    j = tl.arange(0, PART)
    offs = g[:, None] * GS + s * PART + j[None, :]
    v = tl.load(y_ptr + row * N + offs)
    tl.atomic_add(sum_ptr + row * G + g, tl.sum(v, axis=1))


class ModelNew(nn.Module):
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
        y = F.mish(F.hardtanh(y + self.bias)).contiguous()
        gn = self.groupnorm
        G = gn.num_groups
        GS = N // G
        # split each group over more programs when the batch is too small to fill the grid
        SPLIT = 4 if B < 4 else 1
        sums = torch.zeros(B, G, dtype=y.dtype)
        group_sum_kernel[(B, SPLIT)](y, sums, N, G=G, GS=GS, SPLIT=SPLIT)
        mean = (sums / GS).repeat_interleave(GS, dim=1)
        d = y - mean
        sq = torch.zeros(B, G, dtype=y.dtype)
        group_sum_kernel[(B, SPLIT)]((d * d).contiguous(), sq, N, G=G, GS=GS, SPLIT=SPLIT)
        rstd = torch.rsqrt(sq / GS + gn.eps).repeat_interleave(GS, dim=1)
        return d * rstd * gn.weight + gn.bias
