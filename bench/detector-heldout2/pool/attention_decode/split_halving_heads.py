"""Paged decode with split-KV; the split count is halved until the grid fits.

Starting from 16 splits per request, the count is halved while
batch x query heads x splits exceeds 128 programs; each request's own length
is then cut into that many parts.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import finalize, launch_split, merge_splits  # noqa: E402

MAX_PROGRAMS = 128


def _n_splits(batch, heads):
    n = 16
    while n > 1 and batch * heads * n > MAX_PROGRAMS:
        n //= 2
    return n


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, Hq, _ = q.shape
    n = _n_splits(B, Hq)
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=n, split_arg=n, fixed_count=True)
    num, den = merge_splits(acc, ml)
    return finalize(num, den, q.dtype)
