import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gelu_online_softmax_kernel(y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(y_ptr + row * N + cols, mask=mask, other=0.0)
        g = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
        g = tl.where(mask, g, -float("inf"))
        m_new = tl.maximum(m, tl.max(g, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.where(mask, tl.exp(g - m_new), 0.0), axis=0)
        m = m_new
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(y_ptr + row * N + cols, mask=mask, other=0.0)
        g = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
        tl.store(out_ptr + row * N + cols, tl.exp(g - m) / s, mask=mask)


class ModelNew(nn.Module):
    """GEMM over fixed 16-row tiles, then a Triton online-softmax (with GELU fused).
    Many rows -> smaller column blocks to keep register pressure down."""

    TILE_M = 16

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.linear.out_features)
        for s0 in range(0, B, self.TILE_M):
            chunk = x[s0:s0 + self.TILE_M]
            n = chunk.shape[0]
            if n < self.TILE_M:
                chunk = torch.cat([chunk, chunk.new_zeros(self.TILE_M - n, K)])
            y[s0:s0 + n] = F.linear(chunk, self.linear.weight, self.linear.bias)[:n]
        N = y.shape[1]
        out = torch.empty_like(y)
        BLOCK = 1024 if B >= 8 else 8192
        _gelu_online_softmax_kernel[(B,)](y, out, N, BLOCK=BLOCK)
        return out
