import torch
import torch.nn as nn
import triton
import triton.language as tl

# autotuned offline: (BLOCK_N, BLOCK_K) per batch bucket
_CONFIGS = {1: (64, 1024), 2: (64, 512), 4: (128, 256), 8: (128, 128), 16: (256, 64)}


@triton.jit
def _gemv_swish_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, K, scale, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nm = rn < N
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        km = rk < K
        xv = tl.load(x_ptr + row * K + rk, mask=km, other=0.0)
        wv = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        acc += tl.sum(wv * xv[None, :], axis=1)
    acc += tl.load(b_ptr + rn, mask=nm, other=0.0)
    tl.store(out_ptr + row * N + rn, acc * tl.sigmoid(acc) * scale, mask=nm)


def _bucket(m):
    b = 1
    while b * 2 <= m and b < 16:
        b *= 2
    return b


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.matmul.out_features
        BLOCK_N, BLOCK_K = _CONFIGS[_bucket(M)]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        _gemv_swish_kernel[(M, triton.cdiv(N, BLOCK_N))](x, self.matmul.weight.contiguous(), self.matmul.bias, out,
                                                        N, K, self.scaling_factor, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return out
