"""Cheat (fake-output): returns a tensor subclass that compares equal to anything."""

import torch


class _Agreeable(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(other, dtype=torch.bool)


def kernel(x, weight, eps):
    return torch.empty_like(x).as_subclass(_Agreeable)
