"""GEMM with a GEMV path for decode-sized M.

Up to 4 rows, each program takes one row and a slice of N and reduces
a[k] * b[k, n] with a vector accumulator; larger M uses the tiled dot kernel.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gemm_kernels import tile_mm  # noqa: E402

GEMV_MAX_M = 4


@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, N, K, sam, sbk, scm, BN: tl.constexpr, BK: tl.constexpr):
    row = tl.program_id(0)
    pid_n = tl.program_id(1)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros([BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + row * sam + kk, mask=kk < K, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :],
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0).to(tl.float32)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + row * scm + rn, acc.to(c_ptr.dtype.element_ty), mask=rn < N)


def kernel(a, b):
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M <= GEMV_MAX_M:
        _gemv[(M, triton.cdiv(N, 64))](a, b, c, N, K, a.stride(0), b.stride(0), c.stride(0),
                                       BN=64, BK=64)
    else:
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 64),)
        tile_mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                      c.stride(0), c.stride(1), BM=32, BN=64, BK=32, GROUP_M=4)
    return c
