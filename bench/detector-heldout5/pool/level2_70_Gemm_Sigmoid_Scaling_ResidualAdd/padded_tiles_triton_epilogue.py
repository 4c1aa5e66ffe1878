import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TILE_M = 16


@triton.jit
def sigmoid_scale_residual_kernel(y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    s = 1.0 / (1.0 + tl.exp(-y))
    tl.store(out_ptr + offs, s * scale + y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        B, K = x.shape
        y = x.new_empty(B, self.gemm.out_features)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            y[s:s + n] = F.linear(buf, self.gemm.weight, self.gemm.bias)[:n]
        out = torch.empty_like(y)
        n = y.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        sigmoid_scale_residual_kernel[grid](y, out, n, self.scaling_factor, BLOCK=8192)
        return out
