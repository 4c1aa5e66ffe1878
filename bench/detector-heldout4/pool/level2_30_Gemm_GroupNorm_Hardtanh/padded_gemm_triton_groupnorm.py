import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gn_hardtanh_kernel(y_ptr, out_ptr, gamma_ptr, beta_ptr, N, G, eps, lo, hi, GROUP: tl.constexpr):
    row = tl.program_id(0)
    g = tl.program_id(1)
    cols = g * GROUP + tl.arange(0, GROUP)
    v = tl.load(y_ptr + row * N + cols)
    mean = tl.sum(v, axis=0) / GROUP
    d = v - mean
    var = tl.sum(d * d, axis=0) / GROUP
    rstd = 1.0 / tl.sqrt(var + eps)
    gamma = tl.load(gamma_ptr + cols)
    beta = tl.load(beta_ptr + cols)
    o = d * rstd * gamma + beta
    o = tl.minimum(tl.maximum(o, lo), hi)
    tl.store(out_ptr + row * N + cols, o)


class ModelNew(nn.Module):
    TILE_M = 16

    def __init__(self, in_features, out_features, num_groups, hardtanh_min, hardtanh_max):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)
        self.lo = hardtanh_min
        self.hi = hardtanh_max

    def _gemm(self, x):
        B, K = x.shape
        out = x.new_empty(B, self.gemm.out_features)
        for s in range(0, B, self.TILE_M):
            chunk = x[s:s + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            out[s:s + n] = F.linear(chunk, self.gemm.weight, self.gemm.bias)[:n]
        return out

    def forward(self, x):
        y = self._gemm(x).contiguous()
        B, N = y.shape
        G = self.group_norm.num_groups
        out = torch.empty_like(y)
        _gn_hardtanh_kernel[(B, G)](y, out, self.group_norm.weight, self.group_norm.bias, N, G,
                                    self.group_norm.eps, float(self.lo), float(self.hi), GROUP=N // G)
        return out
