"""Flash-attention prefill, tiles fixed by the head dim; GQA by head mapping."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _flash_common import flash_fwd  # noqa: E402


def _tiles(D):
    return (64, 64) if D <= 64 else (64, 32)


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    bm, bn = _tiles(D)
    bm = min(bm, max(16, triton.next_power_of_2(S)))
    bn = min(bn, max(16, triton.next_power_of_2(S)))
    o = torch.empty_like(q)
    grid = (triton.cdiv(S, bm), B * Hq)
    flash_fwd[grid](q, k, v, o, Hq, Hkv, S, sm_scale,
                    q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                    D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=bool(causal), HEADS_FIRST=False)
    return o
