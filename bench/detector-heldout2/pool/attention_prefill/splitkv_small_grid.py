"""Prefill attention with split-KV when the launch is too small for the GPU.

If batch x heads x query-blocks is below the CTA target, the key range is
split and the partial results are merged with their log-sum-exp weights.
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _flash_common import flash_fwd, flash_fwd_split  # noqa: E402

CTAS_PER_SM = 8
MAX_SPLITS = 4
BLOCK_M = BLOCK_N = 16


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 8  # interpreter / CPU runs: behave like a small part


def _num_splits(n_ctas, S, target):
    if n_ctas >= target:
        return 1
    return max(1, min(MAX_SPLITS, target // n_ctas, triton.cdiv(S, BLOCK_N)))


def _merge(acc, ml, shape):
    # acc [BH, n, S, D], ml [BH, n, S, 2] -> [BH, S, D]
    m, l = ml[..., 0], ml[..., 1]
    m_max = m.max(dim=1).values
    num = torch.zeros_like(acc[:, 0])
    den = torch.zeros_like(l[:, 0])
    for s in range(acc.shape[1]):
        w = torch.exp(m[:, s] - m_max)
        num += w[..., None] * acc[:, s]
        den += w * l[:, s]
    return (num / den[..., None]).view(shape)


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    n_m = triton.cdiv(S, BLOCK_M)
    n_split = _num_splits(B * Hq * n_m, S, CTAS_PER_SM * _num_sms(q.device))
    strides = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2))
    if n_split == 1:
        o = torch.empty_like(q)
        flash_fwd[(n_m, B * Hq)](q, k, v, o, Hq, Hkv, S, sm_scale, *strides, D=D,
                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=bool(causal), HEADS_FIRST=False)
        return o
    kv_per = triton.cdiv(triton.cdiv(S, n_split), BLOCK_N) * BLOCK_N
    acc = torch.empty((B * Hq, n_split, S, D), dtype=torch.float32, device=q.device)
    ml = torch.empty((B * Hq, n_split, S, 2), dtype=torch.float32, device=q.device)
    flash_fwd_split[(n_m, B * Hq, n_split)](q, k, v, acc, ml, Hq, Hkv, S, kv_per, sm_scale, *strides,
                                            D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=bool(causal))
    return _merge(acc, ml, q.shape).to(q.dtype)
