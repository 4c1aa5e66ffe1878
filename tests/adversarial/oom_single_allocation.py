"""Failure: asks for a terabyte in one allocation."""

import torch


def kernel(x, weight, eps):
    scratch = torch.empty(1 << 40, dtype=torch.uint8)
    return scratch[: x.numel()].view(x.shape)
