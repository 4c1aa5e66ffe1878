"""Paged decode, split-KV with the split size taken from an env knob.

DECODE_SPLIT_TOKENS (default 96, rounded up to the 16-token block) is a
fixed size in tokens: a request's splits follow its own length only.
"""
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import finalize, launch_split, merge_splits  # noqa: E402

BN = 16
SPLIT_TOKENS = triton.cdiv(int(os.environ.get("DECODE_SPLIT_TOKENS", "96")), BN) * BN


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    n_split = max(1, triton.cdiv(int(seq_lens.max()), SPLIT_TOKENS))
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=n_split, split_arg=SPLIT_TOKENS, fixed_count=False, bn=BN)
    return finalize(*merge_splits(acc, ml), q.dtype)
