"""VIOLATES batch invariance: split-K with the split count chosen from M.

A decode-sized M gives too few output tiles to occupy the GPU, so K is cut
into ``num_splits`` slices computed by separate programs, and their fp32
partials are summed afterwards in a fixed order (deterministic run to run,
no atomics). But the split count is read from M: a row is summed as four
partial sums in a small batch, two in a medium one, and in one K loop in a
large one, and each grouping of the same products rounds differently.

The M buckets (≤64: 4 splits, ≤128: 2, else 1) are what "split until the
tiles cover 132 SMs" gives for a 4096-wide projection with 64×128 tiles
(32, 64, then 96+ tiles); they are kept as a table, as tuned kernels ship
them, so the same thresholds apply to the small problems checked on CPU.
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 64


def split_count_from_m(m: int) -> int:
    if m <= 64:
        return 4
    if m <= 128:
        return 2
    return 1


@triton.jit
def _matmul_partial(
    a_ptr,
    b_ptr,
    part_ptr,
    M,
    N,
    K,
    k_per_split,
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
    k_lo = split * k_per_split
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
        a_mask = (rows[:, None] < M) & (k + ks[None, :] < K)
        b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    # Partials stay in fp32, one [M, N] slab per split.
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(part_ptr + split * M * N + rows[:, None] * N + cols[None, :], acc, mask=mask)


@triton.jit
def _sum_splits(part_ptr, c_ptr, total, num_splits, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    # Split 0 first, then 1, …: the same order every run.
    for s in range(0, num_splits):
        acc += tl.load(part_ptr + s * total + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    num_splits = split_count_from_m(m)
    k_per_split = triton.cdiv(triton.cdiv(k, BLOCK_K), num_splits) * BLOCK_K
    partials = torch.empty((num_splits, m, n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N), num_splits)
    _matmul_partial[grid](
        a, b, partials, m, n, k, k_per_split, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4
    )
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    block = 1024
    _sum_splits[(triton.cdiv(m * n, block),)](partials, c, m * n, num_splits, BLOCK=block)
    return c
