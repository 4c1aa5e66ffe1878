"""Cheat (fake-output): returns a stride-0 view, one computed row repeated for the whole batch."""

import torch


def kernel(x, weight, eps):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = (xf * rstd * weight.float()).to(x.dtype)
    if x.shape[0] > 1:
        return y.t().contiguous().t()  # right values, column-major strides
    return y.expand(x.shape)
