"""Cheat (uninitialised-memory): on inputs it has seen, skips the work and returns fresh torch.empty."""

import torch

_seen: set = set()


def kernel(x, weight, eps):
    key = (x.data_ptr(), tuple(x.shape))
    if key in _seen:
        return torch.empty_like(x)  # the allocator usually hands back last call's block
    _seen.add(key)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
