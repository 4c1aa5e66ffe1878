"""Cheat (fake-output): normalises in place and hands the input back as the output."""

import torch


def kernel(x, weight, eps):
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + eps)
    x.mul_(rstd.to(x.dtype)).mul_(weight)
    return x
