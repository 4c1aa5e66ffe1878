"""Persistent tiled GEMM."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_persistent(
    a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    ks = tl.arange(0, BLOCK_K)
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        rows = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
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


MAX_PROGRAMS = 4


def kernel(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    tiles = triton.cdiv(m, 16) * triton.cdiv(n, 128)
    _gemm_persistent[(min(tiles, MAX_PROGRAMS),)](a, b, c, m, n, k, BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
    return c
