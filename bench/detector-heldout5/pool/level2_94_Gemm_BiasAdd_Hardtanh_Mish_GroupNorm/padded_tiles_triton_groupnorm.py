import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TILE_M = 16


@triton.jit
def hardtanh_mish_groupnorm_kernel(y_ptr, bias_ptr, gamma_ptr, beta_ptr, out_ptr, eps,
                                   N: tl.constexpr, G: tl.constexpr, GS: tl.constexpr):
    row = tl.program_id(0)
    g = tl.arange(0, G)
    j = tl.arange(0, GS)
    cols = g[:, None] * GS + j[None, :]
    y = tl.load(y_ptr + row * N + cols) + tl.load(bias_ptr + cols)
    y = tl.minimum(tl.maximum(y, -1.0), 1.0)
    # mish(y) = y * tanh(softplus(y)); |y| <= 1 so softplus is safe without thresholding
    sp = tl.log(1.0 + tl.exp(y))
    e = tl.exp(-2.0 * sp)
    y = y * (1.0 - e) / (1.0 + e)
    mean = tl.sum(y, axis=1) / GS
    d = y - mean[:, None]
    var = tl.sum(d * d, axis=1) / GS
    rstd = 1.0 / tl.sqrt(var + eps)
    o = d * rstd[:, None] * tl.load(gamma_ptr + cols) + tl.load(beta_ptr + cols)
    tl.store(out_ptr + row * N + cols, o)


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
        out = torch.empty_like(y)
        G = self.groupnorm.num_groups
        hardtanh_mish_groupnorm_kernel[(B,)](y, self.bias, self.groupnorm.weight, self.groupnorm.bias,
                                             out, self.groupnorm.eps, N=N, G=G, GS=N // G)
        return out
