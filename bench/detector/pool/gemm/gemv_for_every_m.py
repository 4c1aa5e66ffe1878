"""Row-wise GEMV used as the GEMM for any M."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One row of a against a column block of b, reduced with elementwise products (no MMA).
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + row * K + k + ks, mask=k + ks < K, other=0.0).to(tl.float32)
        b = tl.load(
            b_ptr + (k + ks[:, None]) * N + cols[None, :],
            mask=(k + ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc += tl.sum(a[:, None] * b.to(tl.float32), axis=0)
    tl.store(c_ptr + row * N + cols, acc.to(c_ptr.dtype.element_ty), mask=cols < N)


def _launch_gemv(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    _gemv[(m, triton.cdiv(n, 128))](a, b, c, n, k, BLOCK_N=128, BLOCK_K=64)
    return c


def kernel(a, b):
    m, n = a.shape[0], b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    return _launch_gemv(a, b, c)
