"""A row-wise RMSNorm kernel written from a few structural knobs, used by the built-in rewrites.

The knobs are the structural choices a kernel engineer would try on the
one-row-per-program seed: several rows per program (a 2-D tile, so one program
reduces ``ROWS_PER_PROGRAM`` rows side by side), and a single pass that keeps
the row in registers when the tile covers it. All of them depend on constants
and the hidden size only, so every variant stays batch-invariant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

MARKER = "# nodice-template: rmsnorm-rows"


@dataclass(frozen=True)
class RowKnobs:
    rows_per_program: int = 1
    tile_cap: int = 1024
    num_warps: int = 4
    single_pass: bool = False


def knobs_of(source: str) -> RowKnobs | None:
    """The knobs of a template-made kernel, or the equivalent knobs of the one-row seed structure."""
    cap = re.search(r"min\(triton\.next_power_of_2\(hidden\),\s*(\d+)\)", source)
    warps = re.search(r"num_warps=(\d+)", source)
    base = RowKnobs(
        tile_cap=int(cap.group(1)) if cap else 1024, num_warps=int(warps.group(1)) if warps else 4
    )
    if MARKER in source:
        rows = re.search(r"^ROWS_PER_PROGRAM = (\d+)", source, re.MULTILINE)
        single = re.search(r"^SINGLE_PASS_WHEN_IT_FITS = (True|False)", source, re.MULTILINE)
        return replace(
            base,
            rows_per_program=int(rows.group(1)) if rows else 1,
            single_pass=bool(single and single.group(1) == "True"),
        )
    if "row = tl.program_id(0)" in source and "[(batch,)]" in source and cap:
        return base
    return None


def render(k: RowKnobs) -> str:
    return f'''"""RMSNorm: a [ROWS_PER_PROGRAM, BLOCK_H] tile per program step.

Batch-invariant: each row is reduced along its own axis of the tile in the same
order whatever the batch; the tile shape depends on constants and the hidden
size only. Rows past the end of the batch are masked, never computed on.
"""

import torch
import triton
import triton.language as tl

{MARKER}
ROWS_PER_PROGRAM = {k.rows_per_program}
SINGLE_PASS_WHEN_IT_FITS = {k.single_pass}


@triton.jit
def _rmsnorm_rows(
    x_ptr, w_ptr, y_ptr, n_rows, hidden, eps,
    ROWS: tl.constexpr, BLOCK_H: tl.constexpr, SINGLE_PASS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    offs = tl.arange(0, BLOCK_H)
    if SINGLE_PASS:
        # The whole row fits one tile: load it once and keep it for the scaling.
        mask = row_ok[:, None] & (offs < hidden)[None, :]
        x = tl.load(x_ptr + rows[:, None] * hidden + offs[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
        w = tl.load(w_ptr + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows[:, None] * hidden + offs[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # Sum of squares in fp32, tile by tile in a fixed order.
        acc = tl.zeros([ROWS, BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            cols = start + offs
            mask = row_ok[:, None] & (cols < hidden)[None, :]
            x = tl.load(x_ptr + rows[:, None] * hidden + cols[None, :], mask=mask, other=0.0)
            x = x.to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / hidden + eps)
        for start in range(0, hidden, BLOCK_H):
            cols = start + offs
            mask = row_ok[:, None] & (cols < hidden)[None, :]
            x = tl.load(x_ptr + rows[:, None] * hidden + cols[None, :], mask=mask, other=0.0)
            w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
            y = x.to(tl.float32) * rstd[:, None] * w[None, :]
            tl.store(y_ptr + rows[:, None] * hidden + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    y = torch.empty_like(x)
    # The tile is a function of the hidden size alone, never of the batch.
    block_h = min(triton.next_power_of_2(hidden), {k.tile_cap})
    single_pass = SINGLE_PASS_WHEN_IT_FITS and block_h >= hidden
    grid = (triton.cdiv(batch, ROWS_PER_PROGRAM),)
    _rmsnorm_rows[grid](
        x, weight, y, batch, hidden, eps,
        ROWS=ROWS_PER_PROGRAM, BLOCK_H=block_h, SINGLE_PASS=single_pass, num_warps={k.num_warps},
    )
    return y
'''
