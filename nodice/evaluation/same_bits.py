"""Same bits as another kernel: the check a knob setting passes before it is timed.

A knob search (``nodice evolve --agent knobs``) moves pins, tile tables and launch options of the
best version, settings that should change how fast a kernel is and never what it computes. So
before the benchmark times a setting, its outputs on the benchmark's workloads are compared bit
for bit with those of the version it would replace, on inputs drawn from one fixed seed. The first
difference is reported (workload, output, flat index, both values) and the setting is not timed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nodice.evaluation.guards.bits import as_bits, same_bits
from nodice.gate import progress
from nodice.loader import load_kernel

if TYPE_CHECKING:
    from nodice.tasks.base import Task, Workload

# Inputs of the comparison: the same tensors for every setting of a search.
SAME_BITS_SEED = 0


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    return []


def first_difference(want: Any, got: Any) -> str | None:
    """Where ``got`` first differs from ``want`` bitwise (shapes and dtypes included), or None."""
    a, b = _tensors(want), _tensors(got)
    if len(a) != len(b):
        return f"{len(b)} output tensors instead of {len(a)}"
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"output {k} is {tuple(y.shape)} {y.dtype}, not {tuple(x.shape)} {x.dtype}"
        if same_bits(x, y):  # -0.0 and +0.0 differ, a NaN matches the same NaN
            continue
        i = int((as_bits(x) != as_bits(y)).reshape(-1).nonzero()[0, 0])
        xf, yf = x.detach().reshape(-1), y.detach().reshape(-1)
        return f"output {k} element {i}: {yf[i].item()!r} where the best version gives {xf[i].item()!r}"
    return None


def same_bits_difference(
    task: Task,
    kernel: Callable[..., Any],
    reference: str | Path,
    entry: str,
    workloads: list[Workload],
    device: torch.device,
    dtype: torch.dtype,
) -> str | None:
    """The first bitwise difference between ``kernel`` and the kernel in ``reference`` on
    ``workloads`` (one line naming the workload), or None when every output matches."""
    from nodice.measuring.throughput import workload_args

    # The best version passed the gate already: its import and calls are the harness's work.
    progress.step("harness")
    best = load_kernel(reference, entry, task, device, dtype).fn
    for w in workloads:
        args = workload_args(task, w, device, dtype, SAME_BITS_SEED)
        with torch.no_grad():
            progress.step("harness")
            want = best(*args)
            progress.step("call")
            got = kernel(*args)
        where = first_difference(want, got)
        if where is not None:
            return f"{w.name}: {where}"
    return None
