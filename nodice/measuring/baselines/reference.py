"""The baseline of a reference task: the reference file's own ``Model``, in eager PyTorch.

Every score of a ``ModelNew`` then carries its speedup over the ``Model`` it
replaces (the number KernelBench reports), measured in the same run, and the
BI audit says whether ``Model`` itself is batch-invariant on the device.
``Model`` runs as the user wrote it: built under the task's seed, in the
inputs' dtype, in eval mode without autograd.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.spec import Baseline

MODEL_BASELINE = "PyTorch Model"


def load_model(task_name: str) -> Callable[..., Any]:
    from nodice.tasks import get_task
    from nodice.tasks.reference import ReferenceTask

    task = get_task(task_name)
    assert isinstance(task, ReferenceTask)
    built: dict[tuple[str, torch.dtype], torch.nn.Module] = {}

    def run(*args: Any) -> Any:
        device, dtype = task.placement(args)
        key = (str(device), dtype)
        if key not in built:
            built[key] = task.eager_model(device, dtype)
        with torch.no_grad():
            return built[key](*args)

    return run


def baselines(task_name: str) -> tuple[Baseline, ...]:
    return (
        Baseline(
            MODEL_BASELINE,
            functools.partial(load_model, task_name),
            "torch",
            ("cpu", "cuda"),
            "the reference's Model in eager PyTorch, in the inputs' dtype",
        ),
    )
