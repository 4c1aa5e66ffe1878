"""Paged decode, split-KV with the chunk size set from the longest request.

Four chunks cover the longest sequence in the batch; shorter requests use as
many of those chunks as they need.
"""
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import finalize, launch_split, merge_splits  # noqa: E402

CHUNKS = 4
BN = 16


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    max_len = int(seq_lens.max())
    chunk = triton.cdiv(triton.cdiv(max_len, CHUNKS), BN) * BN
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=CHUNKS, split_arg=chunk, fixed_count=False, bn=BN)
    num, den = merge_splits(acc, ml)
    return finalize(num, den, q.dtype)
