"""How a reference task is named and seeded, without importing PyTorch.

A task built from a reference file travels between processes (the sandbox
worker, a resumed run) by name: ``reference:/abs/REF.py``, with
``#batch_axis=N`` appended when the batch axis is not 0.

``nodice evolve --reference REF.py`` without ``--seed`` starts from the
reference itself: the seed is REF's own source with ``class ModelNew(Model)``
appended, so the first version is exactly ``Model`` (same layers, same weight
names) and the agent rewrites ``ModelNew`` from there.
"""

from __future__ import annotations

from pathlib import Path

from nodice.errors import ReferenceFileError, UsageError

PREFIX = "reference:"
REFERENCE_ENTRY = "ModelNew"
_AXIS_TAG = "#batch_axis="

SEED_WRAPPER = '''

# ---- the seed of the search: the reference Model itself, as ModelNew --------------------
class ModelNew(Model):
    """The reference, unchanged. Rewrite ``forward`` (Triton, CUDA, fused ops) to make it faster."""
'''


def reference_task_name(path: str | Path, batch_axis: int = 0) -> str:
    """The catalog name of the task built from ``path`` (absolute, so any process can rebuild it)."""
    name = f"{PREFIX}{Path(path).resolve()}"
    return name if batch_axis == 0 else f"{name}{_AXIS_TAG}{batch_axis}"


def task_from_options(
    task: str | None, reference: Path | None, batch_axis: int | None, task_option: str
) -> str:
    """The task a command was given: ``task`` or the one of ``--reference`` (exactly one of them).

    ``task_option`` is how the command spells the task (``--task T``, ``a TASK``) in its error line.
    """
    if (task is None) == (reference is None):
        raise UsageError(f"give either {task_option} or --reference REF.py")
    if reference is None:
        if batch_axis is not None:
            raise UsageError("--batch-axis applies to --reference only (a task fixes its own batch axis)")
        return str(task)
    if batch_axis is not None and batch_axis < 0:
        raise UsageError(f"--batch-axis must be 0 or more, not {batch_axis}")
    if not reference.is_file():
        raise ReferenceFileError(f"no such file: {reference}")
    return reference_task_name(reference, batch_axis or 0)


def is_reference_task(name: str) -> bool:
    return name.startswith(PREFIX)


def parse_task_name(name: str) -> tuple[Path, int]:
    """(reference file, batch axis) of a ``reference:`` task name."""
    body = name.removeprefix(PREFIX)
    axis = 0
    if _AXIS_TAG in body:
        body, _, tail = body.rpartition(_AXIS_TAG)
        if not tail.isdigit():
            raise ReferenceFileError(f"bad batch axis {tail!r} in task name {name!r}")
        axis = int(tail)
    return Path(body), axis


def reference_seed(path: Path) -> str:
    """REF's source with ``class ModelNew(Model)`` appended (the search's first version)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceFileError(f"cannot read {path}: {exc}") from None
    if "class ModelNew" in source:
        return source  # the file already carries its own ModelNew
    return source.rstrip("\n") + "\n" + SEED_WRAPPER
