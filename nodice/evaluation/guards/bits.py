"""Bit-level tensor comparison shared by the guards (NaN-safe, exact)."""

from __future__ import annotations

import torch

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s raw bits as integers of the same width and shape, on the CPU."""
    t = t.detach().contiguous().cpu()
    if t.dtype.is_floating_point or t.is_complex():
        return t.view(_INT_OF_SIZE[t.element_size()])
    return t


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(as_bits(a), as_bits(b))


def differing(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((as_bits(a) != as_bits(b)).sum())
