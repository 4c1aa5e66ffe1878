"""When a reference's output can judge no candidate: NaN, or an output with no finite value.

The gate draws finite inputs. A reference that answers them with NaN anywhere, or with nothing but
infinities in one of its outputs, gives the comparison nothing to hold a candidate to (NaN equals
nothing; an output of infinities alone is no value of the operation), so every candidate would be
judged on the reference's fault. The task that runs a user's reference (a ``--reference`` file, a
FlashInfer-Bench definition) raises its own error for it instead: one line naming the reference,
exit code 2. An infinity among finite values is a defined result (the base-2 log-sum-exp of a row
that attends to nothing is -inf): the correctness stage holds the candidate to it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _at(name: str, where: torch.Tensor) -> str:
    idx = [int(i) for i in torch.nonzero(where)[0]]
    return f"{name}{idx}"


def unusable_output(outputs: Sequence[torch.Tensor], names: Sequence[str], args: tuple[Any, ...]) -> str:
    """Why ``outputs`` (the reference's, named ``names``) for the arguments ``args`` can judge no
    candidate, or "" where they can (always, when an argument is not finite itself)."""
    why = ""
    for name, out in zip(names, outputs, strict=False):
        if not out.is_floating_point() or not out.numel():
            continue
        nan = torch.isnan(out)
        if bool(nan.any()):
            why = f"NaN at {_at(name, nan)} for finite inputs"
            break
        if not bool(torch.isfinite(out).any()):  # infinities alone: the first element is one
            first = out.flatten()[0].item()
            why = f"no finite value in {name} for finite inputs ({_at(name, ~nan)} is {first})"
            break
    # The inputs last, and only then: the weights of a large problem are read once more for nothing.
    for a in args if why else ():
        if isinstance(a, torch.Tensor) and a.is_floating_point() and not bool(torch.isfinite(a).all()):
            return ""
    return why
