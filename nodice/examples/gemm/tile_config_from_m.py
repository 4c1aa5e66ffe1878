"""VIOLATES batch invariance: the tile config is looked up by M.

Like an autotuned kernel that ships a table keyed by M bucket, decode-sized M
(≤16 rows) gets skinny 16-row tiles with long 128-deep K steps, larger M the
128×128 tiles with 64-deep K steps. Each ``tl.dot`` over one K step is its
own partial product added to the fp32 accumulator, so a 128-deep step groups
a row's products differently from two 64-deep ones, and the row's output
depends on how many rows share the launch.

Under Triton's interpreter (CPU) the K-step depth alone changes the bits. On
a GPU the bits also depend on the MMA instruction each config compiles to (a
16-row tile cannot use Hopper's 64-row wgmma), so confirm a GPU verdict with
``nodice check --device cuda``.
"""

import torch
import triton
import triton.language as tl

# (largest M of the bucket, BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
CONFIGS = [
    (16, 16, 64, 128, 4),
    (None, 128, 128, 64, 8),
]


def config_for(m: int) -> tuple[int, int, int, int]:
    for max_m, block_m, block_n, block_k, warps in CONFIGS:
        if max_m is None or m <= max_m:
            return block_m, block_n, block_k, warps
    raise AssertionError("the last bucket takes every M")


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
    block_m, block_n, block_k, warps = config_for(m)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _matmul[grid](a, b, c, m, n, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)
    return c
