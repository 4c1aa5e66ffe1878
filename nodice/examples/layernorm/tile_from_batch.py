"""VIOLATES batch invariance: the reduction tile follows the batch size.

Large batches get a narrower tile "to keep more rows resident" (a common
occupancy heuristic): the row's mean and variance are then folded from a
different number of partial sums in a different order, so a row's statistics
— and its outputs — change with the batch it runs in.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    base = x_ptr + row * hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        acc += tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * hidden + start + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    block_h = min(triton.next_power_of_2(hidden), 1024)
    if batch >= 16:
        block_h = max(block_h // 8, 16)
    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=block_h, num_warps=4)
    return y
