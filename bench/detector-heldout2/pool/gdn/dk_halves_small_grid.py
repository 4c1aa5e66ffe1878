"""Gated delta rule; small grids use a two-half register blocking over Dk.

With fewer than 32 (sequence, head) programs each program has spare
registers, so k^T S is reduced as two independent halves (more ILP).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gdn_common import launch  # noqa: E402

SMALL_GRID = 32


def kernel(q, k, v, g, beta, scale):
    B, T, Hh, _ = q.shape
    return launch(q, k, v, g, beta, scale, dk_halves=B * Hh < SMALL_GRID)
