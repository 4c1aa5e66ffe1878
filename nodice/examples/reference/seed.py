"""RMSNorm ModelNew in Triton: one program per row, a reduction tile fixed by the hidden size.

Batch-invariant because every row is reduced by the same program in the same
order whatever the batch. ``weight`` keeps the name it has in ``Model``, so the
gate copies ``Model``'s values into it.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    # Sum of squares in fp32, accumulated tile by tile in a fixed order.
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


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, hidden = x.shape
        y = torch.empty_like(x)
        # The tile is a function of the hidden size alone, never of the batch.
        block_h = min(triton.next_power_of_2(hidden), 1024)
        _rmsnorm_row[(batch,)](x, self.weight, y, hidden, self.eps, BLOCK_H=block_h, num_warps=4)
        return y
