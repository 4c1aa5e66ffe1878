import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_scale_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, factor,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    out = acc * factor + acc
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], out, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.matmul.out_features
        y = torch.empty(M, N, device=x.device, dtype=torch.float32)
        BM, BN, BK = 64, 512, 512
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        _gemm_scale_kernel[grid](x, self.matmul.weight, self.matmul.bias, y, M, N, K,
                                 float(self.scaling_factor), BM=BM, BN=BN, BK=BK)
        return y
