"""The task catalog: one module per task, each exporting ``TASK``."""

from __future__ import annotations

import importlib
import importlib.util

from nodice.catalog import CATALOG
from nodice.errors import UnknownTaskError
from nodice.tasks.base import BIContext, Problem, Sample, Task, Workload

__all__ = [
    "CATALOG",
    "BIContext",
    "Problem",
    "Sample",
    "Task",
    "Workload",
    "all_tasks",
    "available",
    "get_task",
]


def get_task(name: str) -> Task:
    """The catalog task ``name``, or the task built from a reference file (``reference:PATH``)."""
    if name.startswith("reference:"):
        from nodice.tasks.reference import reference_task

        return reference_task(name)
    if name.startswith("flashinfer:"):
        from nodice.tasks.definition import definition_task

        return definition_task(name)
    if name not in CATALOG:
        raise UnknownTaskError(f"'{name}' (known tasks: {', '.join(CATALOG)})")
    try:
        module = importlib.import_module(f"nodice.tasks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"nodice.tasks.{name}":
            raise
        raise UnknownTaskError(f"'{name}' is listed but not installed") from None
    task: Task = module.TASK
    return task


def available() -> list[str]:
    """Catalog names whose module is present."""
    return [n for n in CATALOG if importlib.util.find_spec(f"nodice.tasks.{n}") is not None]


def all_tasks() -> list[Task]:
    return [get_task(n) for n in available()]
