"""VIOLATES batch invariance: each row's reduction is split across programs when the batch is small.

With fewer rows than streaming multiprocessors, one program per row leaves
most of the GPU idle, so the add and the sum of squares of a row are cut
into ``num_splits`` column chunks (``num_splits`` derived from the batch
size: ``132 // batch``, at most 8) handled by separate programs; a second
kernel adds the chunks' partial sums and normalises. The partials are added
in a fixed order, but how many there are depends on the batch, so the same
row's rstd is rounded differently in a decode step and in a prefill batch.

Each program walks its chunk with a fixed 256-wide tile. (Had each chunk been
one power-of-two tile, the interpreter's numpy pairwise sums would give 2-, 4-
and 8-way splits exactly the unsplit tree, and on CPU only batches that make
an odd split count, such as 17 rows → 7 splits, would show the violation.)
"""

import torch
import triton
import triton.language as tl

SM_COUNT = 132
MAX_SPLITS = 8
CHUNK_TILE = 256


def split_count_from_batch(batch: int) -> int:
    return max(1, min(MAX_SPLITS, SM_COUNT // max(batch, 1)))


@triton.jit
def _add_partial_sumsq(
    x_ptr, res_ptr, res_out_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr
):
    row = tl.program_id(0)
    split = tl.program_id(1)
    base = row * hidden
    offs = tl.arange(0, BLOCK_H)
    lo = split * chunk
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = (x + res).to(res_out_ptr.dtype.element_ty)
        tl.store(res_out_ptr + base + start + offs, r, mask=mask)
        rf = r.to(tl.float32)
        acc += rf * rf
    tl.store(part_ptr + row * num_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _normalize(
    res_out_ptr, w_ptr, part_ptr, y_ptr, hidden, eps, num_splits, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr
):
    row = tl.program_id(0)
    base = row * hidden
    s_offs = tl.arange(0, BLOCK_S)
    parts = tl.load(part_ptr + row * num_splits + s_offs, mask=s_offs < num_splits, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(parts, axis=0) / hidden + eps)
    offs = tl.arange(0, BLOCK_H)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        r = tl.load(res_out_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + start + offs, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, hidden = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    num_splits = split_count_from_batch(batch)
    chunk = triton.cdiv(hidden, num_splits)
    partials = torch.empty((batch, num_splits), dtype=torch.float32, device=x.device)
    _add_partial_sumsq[(batch, num_splits)](
        x,
        residual,
        residual_out,
        partials,
        hidden,
        chunk,
        num_splits,
        BLOCK_H=CHUNK_TILE,
    )
    # A second launch, so every chunk of residual_out is written before it is read back.
    _normalize[(batch,)](
        residual_out,
        weight,
        partials,
        y,
        hidden,
        eps,
        num_splits,
        BLOCK_H=min(triton.next_power_of_2(hidden), 1024),
        BLOCK_S=triton.next_power_of_2(num_splits),
    )
    return y, residual_out
