"""Cheat (fake-output): returns a meta tensor (shape and dtype, no data)."""

import torch


def kernel(x, weight, eps):
    return torch.empty(x.shape, dtype=x.dtype, device="meta")
