"""Helpers for users' own test suites.

from nodice.testing import assert_batch_invariant

def test_my_rmsnorm_is_batch_invariant():
    assert_batch_invariant(my_rmsnorm, task="rmsnorm")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodice.gate.correctness import check_correctness
from nodice.gate.dynamic import DynamicReport, validate
from nodice.gate.runtime import resolve_device
from nodice.loader import check_arity
from nodice.tasks import get_task


class BatchInvarianceError(AssertionError):
    """Raised by :func:`assert_batch_invariant` with the first mismatch in its message."""


def assert_batch_invariant(
    fn: Callable[..., Any],
    *,
    task: str,
    device: str | None = None,
    seed: int = 0,
    check_reference: bool = True,
) -> DynamicReport:
    """Assert that ``fn`` (with the task's signature) is batch-invariant, and correct unless told not to.

    On CPU the inputs are float32 (Triton's interpreter does not compute bf16),
    so Triton kernels must have been defined with ``TRITON_INTERPRET=1`` set.
    """
    t = get_task(task)
    dev = resolve_device(device)
    dtype = t.dtype_for(dev)
    check_arity(fn, getattr(fn, "__name__", "fn"), t.arity)
    source = inspect.getsourcefile(fn) if inspect.isfunction(fn) else None
    where = Path(source) if source else Path("<callable>")
    if check_reference:
        rep = check_correctness(t, fn, where, dev, dtype, seed)
        if not rep.ok:
            raise BatchInvarianceError(f"{task}: not correct against the reference: {rep.detail}")
    report = validate(t, fn, where, dev, dtype, seed)
    if report.mismatch is not None:
        raise BatchInvarianceError(f"{task}: not batch-invariant: {report.mismatch.line()}")
    return report
