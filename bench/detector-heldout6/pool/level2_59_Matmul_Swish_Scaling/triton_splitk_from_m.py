import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _splitk_kernel(x_ptr, w_ptr, part_ptr, M, N, K, K_PER_SPLIT,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    ps = tl.program_id(2)
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    k_lo = ps * K_PER_SPLIT
    for k0 in range(0, K_PER_SPLIT, BLOCK_K):
        rk = k_lo + k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, b)
    tl.store(part_ptr + ps * M * N + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _epilogue_kernel(part_ptr, b_ptr, out_ptr, M, N, SPLITS: tl.constexpr, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < M * N
    acc = tl.zeros((BLOCK,), tl.float32)
    for s in tl.static_range(SPLITS):
        acc += tl.load(part_ptr + s * M * N + offs, mask=m, other=0.0)
    acc += tl.load(b_ptr + offs % N, mask=m, other=0.0)
    y = acc * (1.0 / (1.0 + tl.exp(-acc))) * scale
    tl.store(out_ptr + offs, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.matmul.out_features
        # skinny M: split K to fill the machine
        splits = 4 if M <= 4 else (2 if M <= 16 else 1)
        BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 64
        k_per = triton.cdiv(triton.cdiv(K, splits), BLOCK_K) * BLOCK_K
        part = torch.empty((splits, M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), splits)
        _splitk_kernel[grid](x, self.matmul.weight.contiguous(), part, M, N, K, k_per,
                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        _epilogue_kernel[(triton.cdiv(M * N, 1024),)](part, self.matmul.bias, out, M, N, SPLITS=splits,
                                                       scale=self.scaling_factor, BLOCK=1024)
        return out
