"""Sampling in PyTorch, one generator per request.

Requests that share a seed (common when clients send the default) would draw
identical numbers, so the row index is mixed into each request's seed.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import draw_from, torch_filtered_row  # noqa: E402

_MIX = 0x9E3779B1


def kernel(logits, temperature, top_k, top_p, seed):
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    for i, s in enumerate(seed.tolist()):
        t = float(temperature[i])
        if t == 0:
            out[i] = torch.argmax(logits[i])
            continue
        g = torch.Generator(device=logits.device)
        g.manual_seed((int(s) + i * _MIX) % (1 << 63))
        u = torch.rand((), generator=g, device=logits.device)
        probs, si = torch_filtered_row(logits[i], t, int(top_k[i]), float(top_p[i]))
        out[i] = draw_from(probs, si, u)
    return out
