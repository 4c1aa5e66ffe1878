"""VIOLATES batch invariance: the reduction tile is looked up by batch size.

A per-batch-bucket table (as autotuners leave behind) gives decode-sized
batches a narrow 128-wide tile, to keep register pressure low and occupancy
high, and prefill batches a 1024-wide one. The vector accumulator then folds
a row's squares in a different order, so the row's sum of squares, its rstd
and every element of ``y`` depend on how many rows share the launch.
``residual_out`` is an elementwise add and stays invariant; ``y`` does not.
"""

import torch
import triton
import triton.language as tl


def tile_for_batch(batch: int, hidden: int) -> int:
    if batch < 16:
        return 128
    return min(triton.next_power_of_2(hidden), 1024)


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
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block_h = tile_for_batch(batch, hidden)
    _add_rmsnorm_row[(batch,)](
        x, residual, weight, y, residual_out, hidden, eps, BLOCK_H=block_h, num_warps=4
    )
    return y, residual_out
