"""RMSNorm, one pass over the row: the whole row in registers, read once.

The seed reads each row twice in 1024-wide tiles with 4 warps; at prefill sizes that leaves
a quarter of the copy bandwidth on the table. Here a row of up to MAX_ROW elements is one
tile (``BLOCK_H = next_power_of_2(H)``): it is loaded once, squared and summed in fp32, scaled and
stored. Narrow rows pack several rows into a program (``ROWS``, from H alone) so a program
still moves a few KB. Wider rows fall back to the seed's two-pass loop.

Batch-invariant because the tile width, rows per program and warp count are functions of the
hidden size only: every row is reduced by the same ``tl.sum`` over the same layout, whatever the
batch, and rows in one program never share a reduction.

The pins are the best version of a `nodice evolve --device cuda` run seeded with this design
(lineage in ``lab/results/evolve/rmsnorm/``).
"""

import torch
import triton
import triton.language as tl

MAX_ROW = 16384
# Rows per program so that a program holds at least this many elements.
ROW_ELEMENTS = 2048
# Warps per program, by the row tile's width (never by the batch).
WARPS_UP_TO_1K = 16
WARPS_2K = 8
WARPS_4K = 8
WARPS_8K = 16
WARPS_WIDER = 8
# Cache hints on the one-pass path (1: on; 0: off, as measured in the report): the row is read
# once and written once, so its loads are marked evict-first and its stores streaming (``.cs``),
# and the weight, read by every program, evict-last. Hints move data in the caches only, never
# a value. Off: timed on the H200 (the hints sweep the knob search replaced,
# 2026-12-04, lab/results/h200_2026-12-04/callJ/), they were slower than no hints on both norms
# (× Liger 0.989 against 0.996 for rmsnorm, 0.961 against 0.993 for add_rmsnorm), as were row
# tiles of 8192 and 16384 elements against ROW_ELEMENTS = 2048.
STREAMING_HINTS = 0

# The knobs `nodice evolve rmsnorm --agent knobs` may set (docs/search.md): how rows are spread over
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
def _rmsnorm_rows(
    x_ptr,
    w_ptr,
    y_ptr,
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
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0, eviction_policy=W_EVICT).to(tl.float32)
    y = (x * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=mask, cache_modifier=STORE_CACHE)


@triton.jit
def _rmsnorm_row_looped(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
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


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    block_h = triton.next_power_of_2(hidden)
    if block_h > MAX_ROW:
        _rmsnorm_row_looped[(batch,)](x, weight, y, hidden, eps, BLOCK_H=4096, num_warps=WARPS_WIDER)
        return y
    # Rows per program and warps follow the hidden size alone.
    rows = max(1, ROW_ELEMENTS // block_h)
    _rmsnorm_rows[(triton.cdiv(batch, rows),)](
        x, weight, y, batch, hidden, eps, ROWS=rows, BLOCK_H=block_h, **_hints(), num_warps=_warps(block_h)
    )
    return y


def _hints() -> dict[str, str]:
    """The cache hints of the one-pass kernel (none unless STREAMING_HINTS)."""
    if STREAMING_HINTS:
        return {"ROW_EVICT": "evict_first", "W_EVICT": "evict_last", "STORE_CACHE": ".cs"}
    return {}
