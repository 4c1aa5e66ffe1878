"""Prefill attention; the grid axis order follows the launch size.

Small (batch x heads) launches put heads on grid axis 0 so neighbouring CTAs
share K/V in L2; large ones put query blocks first. The kernel body and tile
constants are the same either way, only program ids are permuted.
"""
import os
import sys
from dataclasses import dataclass

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _flash_common import flash_fwd  # noqa: E402


@dataclass(frozen=True)
class AttnCfg:
    block_m: int
    block_n: int
    warps: int


_CFG: dict = {}


def _cfg(D, causal):
    key = (D, bool(causal))
    if key not in _CFG:
        _CFG[key] = AttnCfg(16, 16, 4) if causal else AttnCfg(16, 32, 4)
    return _CFG[key]


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, Hq, S, D = q.shape
    cfg = _cfg(D, causal)
    n_m = triton.cdiv(S, cfg.block_m)
    heads_first = B * Hq < 64
    grid = (B * Hq, n_m) if heads_first else (n_m, B * Hq)
    o = torch.empty_like(q)
    flash_fwd[grid](q, k, v, o, Hq, k.shape[1], S, sm_scale,
                    q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                    D=D, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=bool(causal),
                    HEADS_FIRST=heads_first, num_warps=cfg.warps)
    return o
