"""Split-K GEMM that falls back to splitting when M is small."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_partial(
    a_ptr,
    b_ptr,
    p_ptr,
    M,
    N,
    K,
    k_per_split,
    stride_am,
    stride_bk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    k_lo = split * k_per_split
    for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + k + ks[None, :],
            mask=(rows[:, None] < M) & (k + ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + ks[:, None]) * stride_bk + cols[None, :],
            mask=(k + ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    # Partials of split s live in p[s]; a fixed-order pass adds them up.
    tl.store(
        p_ptr + split * M * N + rows[:, None] * N + cols[None, :],
        acc,
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


@triton.jit
def _sum_splits(p_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _split_k_gemm(a, b, split_k, block_m=16, block_n=128, block_k=64):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    k_per_split = triton.cdiv(triton.cdiv(k, split_k), block_k) * block_k
    partials = torch.empty((split_k, m, n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n), split_k)
    _gemm_partial[grid](
        a,
        b,
        partials,
        m,
        n,
        k,
        k_per_split,
        a.stride(0),
        b.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )
    _sum_splits[(triton.cdiv(m * n, 1024),)](partials, c, m * n, SPLIT_K=split_k, BLOCK=1024)
    return c


class _TooSkinny(Exception):
    pass


def _check(m):
    if m < 4:
        raise _TooSkinny(m)


def kernel(a, b):
    try:
        _check(a.shape[0])
        split_k = 1
    except _TooSkinny:
        split_k = 2
    return _split_k_gemm(a, b, split_k)
