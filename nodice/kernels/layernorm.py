"""LayerNorm, one pass over the row: the row in registers, read once.

The seed reads each row three times in 1024-wide tiles (mean, squared deviations, output).
Here a row is loaded once and kept in registers; its mean and then the sum of squared deviations
from that mean (the two-moment form, no ``E[x²] - mean²`` cancellation) are reduced in fp32, and
``y`` is written. A tile must be a power of two wide, and LayerNorm widths often are not (Falcon's
4544, BLOOM's 14336): as shipped a row is one tile of ``next_power_of_2(H)`` lanes, the rest
masked. The ``MAX_PARTS`` knob cuts it instead into up to three power-of-two parts from H alone
(4544 → 4096 + 512, 14336 → 8192 + 4096 + 2048), each loaded as its own tile, a row statistic
being the sum of the parts' sums, first part first; timed on an H100 that was slower on every
prefill row (67–87 % of the copy ceiling against 77–92 % for the padded tile: the narrow parts'
loads are split over all the program's threads, a few bytes each), so it ships at 1.

The warps follow the padded width: 4 up to 4096 lanes, 8 above (16 measured 15–20 points
lower at Falcon's 8192 lanes, 8 against 16 lifted BLOOM's 16384 from 77 % to 91 % of copy).
Narrow rows pack several rows per program (``ROWS``, from H alone); rows wider than MAX_ROW keep
the seed's looped passes. On the H100 (``lab/results/h100_2026-12-07d/``): 82–91 % of the copy
ceiling at the four prefill rows, 1.09–1.33× Liger's LayerNorm there; the decode row (128 rows,
1.2 MB) 0.9×.

Batch-invariant because the parts, rows per program and warps depend on the hidden size only:
each row's two reductions are the same ``tl.sum`` calls over the same layouts, added in the same
order, in any batch, and rows never share a reduction.
"""

import torch
import triton
import triton.language as tl

MAX_ROW = 16384
# Rows per program so that a program holds about this many elements (a power of two).
ROW_ELEMENTS = 4096
# Parts a row is cut into at most, and the granularity the row is rounded up to before it is cut:
# the parts are the binary digits of the rounded width, largest first; the last part absorbs
# whatever more parts would have held (rounded up to a power of two).
MAX_PARTS = 1
PART_GRAIN = 128
# Warps per program, by the elements a program holds (never by the batch).
WARPS_UP_TO_2K = 4
WARPS_4K = 4
WARPS_8K = 8
WARPS_WIDER = 8
# Warps of the looped fallback for rows wider than MAX_ROW.
WARPS_LOOPED = 8

# The knobs `nodice evolve layernorm --agent knobs` may set (docs/search.md): how rows are spread
# over programs and warps; each setting must give the best version's bits to be timed.
KNOBS = {
    "ROW_ELEMENTS": (2048, 4096, 8192, 16384),
    "WARPS_UP_TO_2K": (2, 4, 8),
    "WARPS_4K": (4, 8, 16),
    "WARPS_8K": (4, 8, 16),
    "WARPS_WIDER": (8, 16, 32),
}
# The parts a row is cut into decide which elements each partial sum adds: another order of the
# same terms, judged by the whole gate.
ORDER_KNOBS = {
    "MAX_PARTS": (1, 2, 3),
    "PART_GRAIN": (64, 128, 256, 512),
}
# The grain is read only when a row may be cut.
KNOB_WHEN = {"PART_GRAIN": {"MAX_PARTS": (2, 3)}}


def _parts(hidden: int) -> tuple[int, int, int]:
    """The row's power-of-two parts (largest first; 0: absent), from the hidden size alone."""
    width = triton.cdiv(hidden, PART_GRAIN) * PART_GRAIN
    parts: list[int] = []
    while width > 0 and len(parts) < MAX_PARTS - 1:
        top = 1 << (width.bit_length() - 1)
        parts.append(top)
        width -= top
    if width > 0:
        parts.append(triton.next_power_of_2(width))
    first, second, third = [*parts, 0, 0, 0][:3]
    return first, second, third


@triton.jit
def _part_load(x_ptr, base, row_ok, hidden, START: tl.constexpr, SIZE: tl.constexpr):
    cols = START + tl.arange(0, SIZE)
    col_ok = cols < hidden
    x = tl.load(x_ptr + base + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    return x.to(tl.float32), cols, col_ok


@triton.jit
def _part_store(y_ptr, w_ptr, b_ptr, base, row_ok, d, rstd, cols, col_ok):
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = d * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(
        y_ptr + base + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :]
    )


@triton.jit
def _layernorm_rows(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_rows,
    hidden,
    eps,
    ROWS: tl.constexpr,
    PART0: tl.constexpr,
    PART1: tl.constexpr,
    PART2: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    base = rows.to(tl.int64)[:, None] * hidden
    # The mean: each part's sum, added part by part, first to last.
    x0, c0, ok0 = _part_load(x_ptr, base, row_ok, hidden, 0, PART0)
    total = tl.sum(x0, axis=1)
    if PART1 > 0:
        x1, c1, ok1 = _part_load(x_ptr, base, row_ok, hidden, PART0, PART1)
        total += tl.sum(x1, axis=1)
    if PART2 > 0:
        x2, c2, ok2 = _part_load(x_ptr, base, row_ok, hidden, PART0 + PART1, PART2)
        total += tl.sum(x2, axis=1)
    mean = total / hidden
    # The squared deviations from it, in the same order (masked lanes add exact zeros).
    d0 = tl.where(ok0[None, :], x0 - mean[:, None], 0.0)
    sq = tl.sum(d0 * d0, axis=1)
    if PART1 > 0:
        d1 = tl.where(ok1[None, :], x1 - mean[:, None], 0.0)
        sq += tl.sum(d1 * d1, axis=1)
    if PART2 > 0:
        d2 = tl.where(ok2[None, :], x2 - mean[:, None], 0.0)
        sq += tl.sum(d2 * d2, axis=1)
    rstd = 1.0 / tl.sqrt(sq / hidden + eps)
    _part_store(y_ptr, w_ptr, b_ptr, base, row_ok, d0, rstd, c0, ok0)
    if PART1 > 0:
        _part_store(y_ptr, w_ptr, b_ptr, base, row_ok, d1, rstd, c1, ok1)
    if PART2 > 0:
        _part_store(y_ptr, w_ptr, b_ptr, base, row_ok, d2, rstd, c2, ok2)


@triton.jit
def _layernorm_row_looped(x_ptr, w_ptr, b_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
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


def _warps(elements: int) -> int:
    if elements <= 2048:
        return WARPS_UP_TO_2K
    if elements <= 4096:
        return WARPS_4K
    if elements <= 8192:
        return WARPS_8K
    return WARPS_WIDER


def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    if hidden > MAX_ROW:
        _layernorm_row_looped[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=4096, num_warps=WARPS_LOOPED)
        return y
    # Parts, rows per program and warps follow the hidden size alone.
    part0, part1, part2 = _parts(hidden)
    width = part0 + part1 + part2
    per_program = 1 << (ROW_ELEMENTS // width).bit_length() - 1 if width < ROW_ELEMENTS else 1
    _layernorm_rows[(triton.cdiv(batch, per_program),)](
        x,
        weight,
        bias,
        y,
        batch,
        hidden,
        eps,
        ROWS=per_program,
        PART0=part0,
        PART1=part1,
        PART2=part2,
        num_warps=_warps(per_program * width),
    )
    return y
