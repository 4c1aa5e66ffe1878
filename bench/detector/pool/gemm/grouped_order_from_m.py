"""Tiled GEMM with a grouped launch order."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_grouped(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
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
    tl.store(
        c_ptr + rows[:, None] * N + cols[None, :],
        acc.to(c_ptr.dtype.element_ty),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def kernel(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    group_m = 8 if m >= 128 else 2
    grid = (triton.cdiv(m, 16) * triton.cdiv(n, 64),)
    _gemm_grouped[grid](a, b, c, m, n, k, BLOCK_M=16, BLOCK_N=64, BLOCK_K=64, GROUP_M=group_m)
    return c
