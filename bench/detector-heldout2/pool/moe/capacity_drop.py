"""MoE with an expert capacity (token dropping), GShard style.

Each expert takes at most max(4, ceil(T * top_k / E)) assignments, first
come first served in token order; overflow assignments are dropped.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _moe_common import combine_slots, route, run_expert_rows  # noqa: E402

CAPACITY_FACTOR = 1.0
MIN_CAPACITY = 4


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    T = x.shape[0]
    E = w_gate_up.shape[0]
    weights, ids = route(router_logits, top_k)
    cap = max(MIN_CAPACITY, math.ceil(CAPACITY_FACTOR * T * top_k / E))
    flat = ids.reshape(-1)
    onehot = torch.nn.functional.one_hot(flat, E)
    rank = (torch.cumsum(onehot, dim=0) * onehot).sum(-1) - 1   # position within its expert
    keep = (rank < cap).view(T, top_k)
    weights = torch.where(keep, weights, torch.zeros_like(weights))
    tok = torch.arange(T, device=x.device).repeat_interleave(top_k)
    rows = run_expert_rows(x, w_gate_up, w_down, tok, flat)
    return combine_slots(rows, weights, T, top_k).to(x.dtype)
