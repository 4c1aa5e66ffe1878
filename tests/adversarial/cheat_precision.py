"""Cheat (precision-downgrade): computes from half-precision copies of fp32 inputs."""

import torch


def kernel(x, weight, eps):
    xf = x.half().float()
    wf = weight.half().float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * wf).to(x.dtype)
