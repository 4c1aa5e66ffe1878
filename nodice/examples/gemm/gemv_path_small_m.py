"""VIOLATES batch invariance: a GEMV kernel for decode-sized M.

With four rows or fewer a 128-row MMA tile would be almost all padding, so
small M takes a GEMV kernel instead: one program per (row, column block), the
products ``a[k]·b[k, n]`` reduced with ``tl.sum`` over each K block on the
CUDA cores. Larger M takes the tiled tensor-core GEMM, which adds the same
products in another order. A token's output therefore depends on whether it
arrives in a decode step of a few requests or in a bigger batch.
"""

import torch
import triton
import triton.language as tl

GEMV_MAX_ROWS = 4
BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
GEMV_BLOCK_N, GEMV_BLOCK_K = 64, 128


@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + row * K + k + ks, mask=k + ks < K, other=0.0).to(tl.float32)
        b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=b_mask, other=0.0).to(tl.float32)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + row * N + cols, acc.to(c_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _matmul(
    a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a_mask = (rows[:, None] < M) & (k + ks[None, :] < K)
        b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m <= GEMV_MAX_ROWS:
        grid = (m, triton.cdiv(n, GEMV_BLOCK_N))
        _gemv[grid](a, b, c, n, k, BLOCK_N=GEMV_BLOCK_N, BLOCK_K=GEMV_BLOCK_K, num_warps=4)
        return c
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _matmul[grid](
        a, b, c, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=8, num_stages=3
    )
    return c
