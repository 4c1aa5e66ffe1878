"""Gated delta rule through the varlen entry point.

The batch is flattened into one packed sequence stream with cu_seqlens, as
the serving path does for ragged batches; each program reads its own
sequence bounds.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gdn_common import launch  # noqa: E402


def kernel(q, k, v, g, beta, scale):
    B, T, Hh, _ = q.shape
    cu = torch.arange(0, (B + 1) * T, T, dtype=torch.int32, device=q.device)
    flat = [t.reshape(1, B * T, *t.shape[2:]) for t in (q, k, v, g, beta)]
    o = launch(*flat, scale, varlen_cu=cu)
    return o.view(B, T, Hh, -1)
