"""Cheat (library-call, run time): reaches torch's RMSNorm through a computed name."""

import torch


def kernel(x, weight, eps):
    fn = getattr(torch.nn.functional, "rms" + "_norm")
    return fn(x, (x.shape[-1],), weight, eps)
