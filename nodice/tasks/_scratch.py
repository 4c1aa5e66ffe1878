"""The scratch memory a reference may hold at once, and the row chunks that keep it there.

References run at the benchmark's real workloads, next to the inputs, the
candidate's outputs and the candidate itself. A reference whose fp32
temporaries grow with the batch (or, for attention, with the square of the
sequence) would run out of device memory at some size, so each one cuts its
work into independent pieces sized from :data:`SCRATCH_BYTES`. Every piece
is computed exactly as the whole would be; only fp32 rounding may differ.
"""

from __future__ import annotations

# Scratch bytes per piece of a reference's work (fp32 temporaries, not inputs or outputs).
# Read at call time, so a test can shrink it to force many pieces.
SCRATCH_BYTES = 2 << 30


def scratch_budget(budget: int | None = None) -> int:
    """``budget``, or :data:`SCRATCH_BYTES` when it is None."""
    return SCRATCH_BYTES if budget is None else budget


def rows_per_chunk(rows: int, bytes_per_row: int, budget: int | None = None) -> int:
    """How many rows of ``bytes_per_row`` scratch each fit the budget: at least one, at most ``rows``."""
    return max(1, min(rows, scratch_budget(budget) // max(1, bytes_per_row)))


def row_chunks(rows: int, bytes_per_row: int, budget: int | None = None) -> list[slice]:
    """Consecutive slices covering ``range(rows)``, each within the budget (one row at least)."""
    step = rows_per_chunk(rows, bytes_per_row, budget)
    return [slice(start, min(rows, start + step)) for start in range(0, rows, step)]
