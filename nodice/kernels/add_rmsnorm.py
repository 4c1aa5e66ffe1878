"""Fused add + RMSNorm, one pass over the row: both inputs read once, both outputs written once.

The seed reads x and the residual twice (it recomputes the rounded sum rather than re-reading
its own stores). Here a row of up to MAX_ROW elements is one tile: ``r = x + residual`` is
rounded to the io dtype (that rounded value is what ``residual_out`` holds and what is
normalised, as in the seed), its squares are summed in fp32, and ``y`` is written from the same
registers. Narrow rows pack several rows per program (``ROWS``, from H alone); wider rows fall
back to the seed's two-pass loop.

Batch-invariant because tile width, rows per program and warps depend on the hidden size only:
each row is reduced by the same ``tl.sum`` over the same layout in any batch, and rows never
share a reduction.

The pins are the best version of a `nodice evolve --device cuda` run seeded with this design
(lineage in ``lab/results/evolve/add_rmsnorm/``).
"""

import torch
import triton
import triton.language as tl

MAX_ROW = 16384
ROW_ELEMENTS = 2048
# Warps per program, by the row tile's width (never by the batch).
WARPS_UP_TO_1K = 8
WARPS_2K = 8
WARPS_4K = 8
WARPS_8K = 16
WARPS_WIDER = 16
# Cache hints on the one-pass path (1: on; 0: off, as measured in the report): x and the residual
# are read once and both outputs written once (evict-first loads, streaming ``.cs`` stores), the
# weight is read by every program (evict-last). Hints move data in the caches only, never a
# value. Off: timed on the H200 (the hints sweep the knob search replaced,
# 2026-12-04, lab/results/h200_2026-12-04/callJ/), they were slower than no hints on both norms
# (× Liger 0.989 against 0.996 for rmsnorm, 0.961 against 0.993 for add_rmsnorm), as were row
# tiles of 8192 and 16384 elements against ROW_ELEMENTS = 2048.
STREAMING_HINTS = 0

# The knobs `nodice evolve add_rmsnorm --agent knobs` may set (docs/search.md): how rows are spread over
# programs and warps, and the cache hints. Each setting must give the best version's bits to be timed.
KNOBS = {
    "ROW_ELEMENTS": (1024, 2048, 4096, 8192, 16384),
    "WARPS_UP_TO_1K": (4, 8, 16),
    "WARPS_2K": (4, 8, 16),
    "WARPS_4K": (4, 8, 16),
    "WARPS_8K": (8, 16, 32),
    "WARPS_WIDER": (8, 16, 32),
    "STREAMING_HINTS": (0, 1),
}


@triton.jit
def _add_rmsnorm_rows(
    x_ptr,
    res_ptr,
    w_ptr,
    y_ptr,
    res_out_ptr,
    n_rows,
    hidden,
    eps,
    ROWS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ROW_EVICT: tl.constexpr = "",
    W_EVICT: tl.constexpr = "",
    STORE_CACHE: tl.constexpr = "",
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows < n_rows)[:, None] & (cols < hidden)[None, :]
    offs = rows.to(tl.int64)[:, None] * hidden + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy=ROW_EVICT).to(tl.float32)
    res = tl.load(res_ptr + offs, mask=mask, other=0.0, eviction_policy=ROW_EVICT).to(tl.float32)
    r = (x + res).to(res_out_ptr.dtype.element_ty)
    tl.store(res_out_ptr + offs, r, mask=mask, cache_modifier=STORE_CACHE)
    rf = r.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(rf * rf, axis=1) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0, eviction_policy=W_EVICT).to(tl.float32)
    y = (rf * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=mask, cache_modifier=STORE_CACHE)


@triton.jit
def _add_rmsnorm_row_looped(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * hidden
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


def _warps(block_h: int) -> int:
    if block_h <= 1024:
        return WARPS_UP_TO_1K
    if block_h <= 2048:
        return WARPS_2K
    if block_h <= 4096:
        return WARPS_4K
    if block_h <= 8192:
        return WARPS_8K
    return WARPS_WIDER


def kernel(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, hidden = x.shape
    x = x.contiguous()
    residual = residual.contiguous()
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block_h = triton.next_power_of_2(hidden)
    if block_h > MAX_ROW:
        _add_rmsnorm_row_looped[(batch,)](
            x, residual, weight, y, residual_out, hidden, eps, BLOCK_H=2048, num_warps=WARPS_WIDER
        )
        return y, residual_out
    # Rows per program and warps follow the hidden size alone.
    rows = max(1, ROW_ELEMENTS // block_h)
    _add_rmsnorm_rows[(triton.cdiv(batch, rows),)](
        x,
        residual,
        weight,
        y,
        residual_out,
        batch,
        hidden,
        eps,
        ROWS=rows,
        BLOCK_H=block_h,
        **_hints(),
        num_warps=_warps(block_h),
    )
    return y, residual_out


def _hints() -> dict[str, str]:
    """The cache hints of the one-pass kernel (none unless STREAMING_HINTS)."""
    if STREAMING_HINTS:
        return {"ROW_EVICT": "evict_first", "W_EVICT": "evict_last", "STORE_CACHE": ".cs"}
    return {}
