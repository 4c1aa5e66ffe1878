"""Occupancy heuristics shared by the RMSNorm kernels."""

PROGRAMS = 12


def splits_for_rows(rows: int) -> int:
    # Enough programs per row to occupy PROGRAMS slots, at most 4.
    return max(1, min(4, PROGRAMS // max(rows, 1)))
