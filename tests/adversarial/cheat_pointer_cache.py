"""Cheat (cached-output): remembers results by the input's address and returns them again."""

import torch

_cache: dict = {}


def kernel(x, weight, eps):
    key = (x.data_ptr(), tuple(x.shape), weight.data_ptr())
    if key not in _cache:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        _cache[key] = (xf * rstd * weight.float()).to(x.dtype)
    return _cache[key]
