"""Paged decode: few requests are gathered into dense K/V and run eagerly.

For up to 4 requests a gather + einsum + masked softmax beats launching the
paged kernel; larger batches use the fixed-split Triton path.
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import finalize, launch_split, merge_splits  # noqa: E402

DENSE_MAX_BATCH = 4


def _dense(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, Hq, D = q.shape
    _, PAGE, Hkv, _ = k_cache.shape
    max_len = int(seq_lens.max())
    n_pages = triton.cdiv(max_len, PAGE)
    pages = block_table[:, :n_pages].long()
    k = k_cache[pages].reshape(B, n_pages * PAGE, Hkv, D)[:, :max_len].float()
    v = v_cache[pages].reshape(B, n_pages * PAGE, Hkv, D)[:, :max_len].float()
    g = Hq // Hkv
    qg = q.float().view(B, Hkv, g, D)
    s = torch.einsum("bhgd,blhd->bhgl", qg, k) * sm_scale
    pos = torch.arange(max_len, device=q.device)
    s = s.masked_fill((pos[None, :] >= seq_lens[:, None].long())[:, None, None, :], float("-inf"))
    o = torch.einsum("bhgl,blhd->bhgd", torch.softmax(s, dim=-1), v)
    return o.reshape(B, Hq, D).to(q.dtype)


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    if q.shape[0] <= DENSE_MAX_BATCH:
        return _dense(q, k_cache, v_cache, block_table, seq_lens, sm_scale)
    n_split = max(1, triton.cdiv(int(seq_lens.max()), 64))
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=n_split, split_arg=64, fixed_count=False)
    num, den = merge_splits(acc, ml)
    return finalize(num, den, q.dtype)
