"""Sampling in PyTorch: a loop over requests, each with its own generator."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import draw_from, torch_filtered_row  # noqa: E402


def kernel(logits, temperature, top_k, top_p, seed):
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    temps = temperature.tolist()
    ks = top_k.tolist()
    ps = top_p.tolist()
    for i, s in enumerate(seed.tolist()):
        if temps[i] == 0:
            out[i] = torch.argmax(logits[i])
            continue
        g = torch.Generator(device=logits.device)
        g.manual_seed(int(s))
        u = torch.rand((), generator=g, device=logits.device)
        probs, si = torch_filtered_row(logits[i], temps[i], ks[i], ps[i])
        out[i] = draw_from(probs, si, u)
    return out
