import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_splitk_kernel(x_ptr, w_ptr, p_ptr, M, N, K, k_per_split,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    ps = tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_lo = ps * k_per_split
    for k0 in range(0, k_per_split, BK):
        kk = k_lo + k0 + rk
        km = (kk < K) & (k0 + rk < k_per_split)
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & km[None, :], other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=(rn[None, :] < N) & km[:, None], other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(p_ptr + ps * M * N + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.matmul.out_features
        BM, BN, BK = 32, 512, 512
        m_tiles = triton.cdiv(M, BM)
        # skinny problems do not produce enough output tiles: split K to reach ~16 programs
        SPLIT_K = max(1, min(4, 16 // (m_tiles * triton.cdiv(N, BN))))
        k_per_split = triton.cdiv(K, SPLIT_K)
        part = torch.empty(SPLIT_K, M, N, device=x.device, dtype=torch.float32)
        _gemm_splitk_kernel[(m_tiles, triton.cdiv(N, BN), SPLIT_K)](x, self.matmul.weight, part, M, N, K,
                                                                    k_per_split, BM=BM, BN=BN, BK=BK)
        y = part.sum(dim=0) + self.matmul.bias
        # x*s + x  ==  x*(1+s)
        return y * (1.0 + self.scaling_factor)
