"""Prefill attention with launch plans cached by CTA count.

The plan (key tile width, warps) is computed once per CTA count and reused;
wide launches get the big 64-key tile, narrow ones a 16-key tile.
"""
import os
import sys
from dataclasses import dataclass

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _flash_common import flash_fwd  # noqa: E402

BLOCK_M = 16


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 8  # interpreter / CPU runs: behave like a small part


@dataclass
class Plan:
    block_n: int
    num_warps: int


_PLANS: dict = {}


def _plan(n_ctas, wide_from):
    plan = _PLANS.get(n_ctas)
    if plan is None:
        plan = Plan(block_n=64, num_warps=4) if n_ctas >= wide_from else Plan(block_n=16, num_warps=2)
        _PLANS[n_ctas] = plan
    return plan


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, Hq, S, D = q.shape
    n_m = triton.cdiv(S, BLOCK_M)
    plan = _plan(B * Hq * n_m, 6 * _num_sms(q.device))
    o = torch.empty_like(q)
    flash_fwd[(n_m, B * Hq)](
        q, k, v, o, Hq, k.shape[1], S, sm_scale,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        D=D, BLOCK_M=BLOCK_M, BLOCK_N=plan.block_n, CAUSAL=bool(causal), HEADS_FIRST=False,
        num_warps=plan.num_warps)
    return o
