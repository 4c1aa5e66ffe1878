"""Rule ``cached-output``: every call computes its result from the inputs it is given.

The gate draws fresh inputs for every trial, which defeats caches keyed on
content it has not seen. A cache keyed on the tensors' addresses (or on a few
probed elements) survives that; here the inputs are overwritten in place with
new data — same addresses, same shapes — and the kernel must follow.
"""

from __future__ import annotations

from typing import Any

import torch

RULE = "cached-output"
DESCRIPTION = "returns a result cached from an earlier call instead of computing it from the inputs"


def refill_in_place(args: tuple[Any, ...], gen: torch.Generator) -> None:
    """New values in every floating-point input, written into the same memory."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and a.numel():
            fresh = torch.randn(a.shape, generator=gen, dtype=torch.float32) * a.float().std().cpu()
            fresh = torch.where(fresh == 0, torch.full_like(fresh, 1e-3), fresh)
            a.copy_(fresh.to(device=a.device, dtype=a.dtype) + a.float().mean().to(a.dtype))
