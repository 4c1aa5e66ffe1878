"""Bad output, not a cheat: the right values in column-major strides (outputs must be contiguous)."""

import torch


def kernel(x, weight, eps):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = (xf * rstd * weight.float()).to(x.dtype)
    return y.t().contiguous().t()
