"""Paged decode: single pass when every request is short, fixed-size split-KV
otherwise.

The single-pass kernel and a one-split request in the split path run the same
per-range loop from token 0 and normalise through the same finalize, so a
request's bits don't depend on which path its batchmates select.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paged_common import decode_range, finalize, launch_split, merge_splits  # noqa: E402

SPLIT_TOKENS = 128
BN = 16


@triton.jit
def _single_pass(q_ptr, kc_ptr, vc_ptr, bt_ptr, sl_ptr, acc_ptr, l_ptr, Hq, Hkv, maxp,
                 s_kp, s_ks, s_kh, sm_scale, D: tl.constexpr, PAGE: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    L = tl.load(sl_ptr + b)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + (b * Hq + h) * D + offs_d).to(tl.float32)
    acc, m, l = decode_range(q, kc_ptr, vc_ptr, bt_ptr + b * maxp, h // (Hq // Hkv), 0, L,
                             s_kp, s_ks, s_kh, sm_scale, D, PAGE, BN)
    tl.store(acc_ptr + (b * Hq + h) * D + offs_d, acc)
    tl.store(l_ptr + b * Hq + h, l)


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, Hq, D = q.shape
    max_len = int(seq_lens.max())
    if max_len <= SPLIT_TOKENS:
        acc = torch.empty((B, Hq, D), dtype=torch.float32, device=q.device)
        l = torch.empty((B, Hq), dtype=torch.float32, device=q.device)
        _single_pass[(B, Hq)](q.contiguous(), k_cache, v_cache, block_table, seq_lens, acc, l,
                              Hq, k_cache.shape[2], block_table.shape[1],
                              k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), sm_scale,
                              D=D, PAGE=k_cache.shape[1], BN=BN)
        return finalize(acc, l, q.dtype)
    n_split = triton.cdiv(max_len, SPLIT_TOKENS)
    acc, ml = launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                           n_split=n_split, split_arg=SPLIT_TOKENS, fixed_count=False, bn=BN)
    num, den = merge_splits(acc, ml)
    return finalize(num, den, q.dtype)
