"""Failure (CUDA): a Triton kernel that writes far outside its output (illegal memory access)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scribble(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + (1 << 40)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))


def kernel(x, weight, eps):
    y = torch.empty_like(x, dtype=torch.float32)
    _scribble[(1,)](y, y.numel(), BLOCK=128)
    torch.cuda.synchronize()
    return y.to(x.dtype)
