"""Control on CUDA: the bundled batch-invariant RMSNorm seed, which must pass and get a score.

The eager-torch control is not batch-invariant on CUDA: torch picks its fp32 row-reduction
strategy from the number of rows, and the fp32 probe rejects it (rightly).
"""

import torch
import triton
import triton.language as tl


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


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    y = torch.empty_like(x)
    # The tile is a function of the hidden size alone, never of the batch.
    block_h = min(triton.next_power_of_2(hidden), 1024)
    _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=block_h, num_warps=4)
    return y
