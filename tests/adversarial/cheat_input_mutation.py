"""Cheat (input-mutation): leaves its scratch in the input (the next call sees other data)."""

import torch


def kernel(x, weight, eps):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = (xf * rstd * weight.float()).to(x.dtype)
    x[0, 0] = 0.0  # "scratch"
    return y
