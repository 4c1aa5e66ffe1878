"""RMSNorm with 64-bit row offsets for huge inputs."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    wide = batch * hidden >= 2**31
    _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=1024, WIDE=wide)
    return y
