"""VIOLATES batch invariance: decode-sized batches take an eager PyTorch path.

For a handful of rows the launch overhead of the Triton kernel dominates, so
batches of four rows or fewer run the same maths as PyTorch ops instead. The
eager ``mean`` reduces a row's squares in another order than the Triton
kernel's tile accumulator, so a row's ``y`` depends on the batch it arrives
in (``residual_out``, an elementwise add, matches on both paths).
"""

import torch
import triton
import triton.language as tl

EAGER_MAX_ROWS = 4


@triton.jit
def _add_rmsnorm_row(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    base = row * hidden
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = (x + res).to(res_out_ptr.dtype.element_ty)
        tl.store(res_out_ptr + base + start + offs, r, mask=mask)
        rf = r.to(tl.float32)
        acc += rf * rf
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = (x + res).to(res_out_ptr.dtype.element_ty).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + start + offs, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, hidden = x.shape
    if batch <= EAGER_MAX_ROWS:
        residual_out = x + residual
        r = residual_out.float()
        y = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return y.to(x.dtype), residual_out
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block_h = min(triton.next_power_of_2(hidden), 1024)
    _add_rmsnorm_row[(batch,)](
        x, residual, weight, y, residual_out, hidden, eps, BLOCK_H=block_h, num_warps=4
    )
    return y, residual_out
