import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TILE_M = 16


@triton.jit
def swish_div_clamp_tanh_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    y = y * (1.0 / (1.0 + tl.exp(-y)))
    y = y / 2.0
    y = tl.minimum(tl.maximum(y, -1.0), 1.0)
    e = tl.exp(-2.0 * tl.abs(y))
    t = (1.0 - e) / (1.0 + e)
    y = tl.where(y < 0, -t, t)
    y = tl.minimum(tl.maximum(y, -1.0), 1.0)
    tl.store(out_ptr + offs, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.gemm.out_features)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            y[s:s + n] = F.linear(buf, self.gemm.weight, self.gemm.bias)[:n]
        out = torch.empty_like(y)
        total = y.numel()
        BLOCK = 4096 if B <= 16 else 16384
        swish_div_clamp_tanh_kernel[(triton.cdiv(total, BLOCK),)](y, out, total, BLOCK=BLOCK)
        return out
