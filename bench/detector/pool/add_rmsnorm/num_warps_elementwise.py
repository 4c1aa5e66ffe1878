"""Two-pass fused add + RMSNorm; the add pass scales its warps with the batch."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rows(x_ptr, r_ptr, ro_ptr, hidden, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < hidden
    s = tl.load(x_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(
        r_ptr + row * hidden + offs, mask=mask, other=0.0
    ).to(tl.float32)
    tl.store(ro_ptr + row * hidden + offs, s.to(ro_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _norm_rows(ro_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < hidden
    s = tl.load(ro_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / hidden + eps)
    tl.store(y_ptr + row * hidden + offs, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block = triton.next_power_of_2(hidden)
    _add_rows[(batch,)](x, residual, residual_out, hidden, BLOCK_H=block, num_warps=2 if batch < 8 else 8)
    _norm_rows[(batch,)](residual_out, weight, y, hidden, eps, BLOCK_H=block, num_warps=8)
    return y, residual_out
