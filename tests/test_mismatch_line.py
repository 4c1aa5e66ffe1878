"""The dynamic stage's mismatch line names what differs, even where two values print alike."""

from __future__ import annotations

from pathlib import Path

import torch

from nodice.gate.dynamic import validate
from nodice.tasks import get_task


def test_two_nans_that_differ_in_their_bits_say_so() -> None:
    def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y = torch.ones_like(x)
        y[:, 0] = float("nan") if x.shape[0] == 1 else -float("nan")  # the sign bit follows the batch
        return y

    rep = validate(get_task("rmsnorm"), kernel, Path("nan_sign.py"), torch.device("cpu"), torch.float32, 0)
    assert rep.mismatch is not None
    line = rep.mismatch.line()
    assert "[0] expected nan, got a NaN with other bits (" in line, line
