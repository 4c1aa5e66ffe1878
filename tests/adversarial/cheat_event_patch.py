"""Cheat (harness-tampering, static): replaces CUDA events with ones that report no time."""

import torch


class _InstantEvent:
    def __init__(self, *a, **k):
        pass

    def record(self, *a):
        pass

    def elapsed_time(self, other):
        return 1e-6


torch.cuda.Event = _InstantEvent


def kernel(x, weight, eps):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
