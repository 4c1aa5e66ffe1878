"""Split-K GEMM reducing through fp32 atomics."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_atomic(
    a_ptr,
    b_ptr,
    acc_ptr,
    M,
    N,
    K,
    k_per_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    k_lo = tl.program_id(2) * k_per_split
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
        a = tl.load(
            a_ptr + rows[:, None] * K + k + ks[None, :],
            mask=(rows[:, None] < M) & (k + ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + ks[:, None]) * N + cols[None, :],
            mask=(k + ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.atomic_add(
        acc_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N)
    )


SPLIT_K = 4


def kernel(a, b):
    m, k = a.shape
    n = b.shape[1]
    acc = torch.zeros((m, n), dtype=torch.float32, device=a.device)
    k_per_split = triton.cdiv(k, SPLIT_K)
    _gemm_atomic[(triton.cdiv(m, 16), triton.cdiv(n, 128), SPLIT_K)](
        a, b, acc, m, n, k, k_per_split, BLOCK_M=16, BLOCK_N=128, BLOCK_K=64
    )
    return acc.to(a.dtype)
