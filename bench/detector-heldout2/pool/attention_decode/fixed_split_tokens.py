"""Paged decode, split-KV with a fixed 64-token split size.

A request's splits are determined by its own length only; the longest
sequence in the batch only sizes the grid (splits past a request's end are
empty and merge with weight zero).
"""
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import finalize, launch_split, merge_splits  # noqa: E402

SPLIT_TOKENS = 64


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    max_len = int(seq_lens.max())
    n_split = max(1, triton.cdiv(max_len, SPLIT_TOKENS))
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=n_split, split_arg=SPLIT_TOKENS, fixed_count=False)
    num, den = merge_splits(acc, ml)
    return finalize(num, den, q.dtype)
