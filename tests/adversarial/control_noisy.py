"""Control: honest but noisy, it prints 2 MB on every call (about 300 MB over the gate); must pass."""

import sys

import torch

_BLOCK = ("chatty kernel " * 63 + "\n") * 2300


def kernel(x, weight, eps):
    sys.stdout.write(_BLOCK)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
