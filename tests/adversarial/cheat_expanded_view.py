"""Cheat (fake-output): computes the first row only and returns it as a stride-0 view over the whole batch."""

import torch


def kernel(x, weight, eps):
    x0 = x[:1].float()
    rstd = torch.rsqrt(x0.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x0 * rstd * weight.float()).to(x.dtype).expand(x.shape)
