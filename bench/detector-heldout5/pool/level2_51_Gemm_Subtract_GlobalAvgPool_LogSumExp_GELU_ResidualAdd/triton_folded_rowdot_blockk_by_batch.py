import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rowdot_gelu_residual_kernel(x_ptr, w_ptr, out_ptr, c, K, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        xv = tl.load(x_ptr + row * K + k0 + offs)
        wv = tl.load(w_ptr + k0 + offs)
        acc += xv * wv
    m = tl.sum(acc, axis=0) + c
    g = 0.5 * m * (1.0 + tl.erf(m * 0.7071067811865476))
    for k0 in range(0, K, BLOCK_K):
        xv = tl.load(x_ptr + row * K + k0 + offs)
        tl.store(out_ptr + row * K + k0 + offs, xv + g)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = x.contiguous()
        B, K = x.shape
        w_mean = self.gemm.weight.mean(dim=0).contiguous()
        c = float((self.gemm.bias - self.subtract).mean())
        out = torch.empty_like(x)
        # wide K blocks when few rows (more work per program), narrower once the grid is full
        BLOCK_K = 2048 if B < 4 else 1024
        rowdot_gelu_residual_kernel[(B,)](x, w_mean, out, c, K, BLOCK_K=BLOCK_K)
        return out
