"""Failure: keeps touching fresh memory until something stops it."""

import torch

_hoard = []


def kernel(x, weight, eps):
    while True:
        _hoard.append(torch.ones(1 << 27))  # 512 MB, written so that it is resident
