"""Rule ``input-mutation``: the kernel reads its inputs and leaves them as they were.

Writing into the inputs turns the next repetition of a benchmark into a
different (often easier) problem, and hands later calls precomputed state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodice.evaluation.guards.bits import same_bits

RULE = "input-mutation"
DESCRIPTION = "modifies its input tensors"


def copies(args: tuple[Any, ...]) -> list[torch.Tensor | None]:
    return [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]


def mutated(
    args: tuple[Any, ...],
    before: list[torch.Tensor | None],
    label: Callable[[int], str] = lambda i: f"input argument {i}",
) -> str | None:
    """``label`` names an argument by its index (the task's words)."""
    for i, (a, b) in enumerate(zip(args, before, strict=True)):
        if b is None or not isinstance(a, torch.Tensor):
            continue
        if not same_bits(a, b):
            return f"{label(i)} was modified by the call"
    return None
