"""Residual add as its own elementwise pass, then RMSNorm."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, r_ptr, ro_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(
        r_ptr + offs, mask=mask, other=0.0
    ).to(tl.float32)
    tl.store(ro_ptr + offs, s.to(ro_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_row(ro_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        s = tl.load(ro_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0).to(
            tl.float32
        )
        acc += s * s
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        s = tl.load(ro_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, weight, eps):
    batch, hidden = x.shape
    residual_out = torch.empty_like(x)
    y = torch.empty_like(x)
    n = x.numel()
    block = 512 if batch <= 2 else 2048
    _add[(triton.cdiv(n, block),)](x, residual, residual_out, n, BLOCK=block)
    _rmsnorm_row[(batch,)](residual_out, weight, y, hidden, eps, BLOCK_H=512)
    return y, residual_out
