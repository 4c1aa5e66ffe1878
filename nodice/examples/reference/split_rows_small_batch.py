"""VIOLATES batch invariance: split-row reduction when the batch cannot fill the GPU.

With fewer rows than streaming multiprocessors, each row's sum of squares is
split across ``num_splits`` programs (``num_splits`` derived from the batch
size) and the partial sums are combined afterwards: a different summation
order from the one-program-per-row path that large batches take.
"""

import torch
import triton
import triton.language as tl
from torch import nn

SM_COUNT = 132


@triton.jit
def _partial_sumsq(x_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    lo = split * chunk
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(part_ptr + row * num_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _normalize(
    x_ptr, w_ptr, part_ptr, y_ptr, hidden, eps, num_splits, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr
):
    row = tl.program_id(0)
    s_offs = tl.arange(0, BLOCK_S)
    parts = tl.load(part_ptr + row * num_splits + s_offs, mask=s_offs < num_splits, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(parts, axis=0) / hidden + eps)
    offs = tl.arange(0, BLOCK_H)
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
        num_splits = max(1, min(8, SM_COUNT // max(batch, 1)))
        chunk = triton.cdiv(hidden, num_splits)
        partials = torch.empty((batch, num_splits), dtype=torch.float32, device=x.device)
        _partial_sumsq[(batch, num_splits)](
            x, partials, hidden, chunk, num_splits, BLOCK_H=min(triton.next_power_of_2(chunk), 1024)
        )
        _normalize[(batch,)](
            x,
            self.weight,
            partials,
            y,
            hidden,
            self.eps,
            num_splits,
            BLOCK_H=min(triton.next_power_of_2(hidden), 1024),
            BLOCK_S=triton.next_power_of_2(num_splits),
        )
        return y
