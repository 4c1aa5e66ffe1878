"""How a reference task is named and seeded, without importing PyTorch.

A task built from a reference file travels between processes (the sandbox
worker, a resumed run) by name: ``reference:/abs/REF.py``, with
``#batch_axis=N`` appended when the batch axis is not 0, ``#batch_size=N``
when the batch is shrunk (``--batch-size``) and ``#eval`` when the modules run
in eval mode (``--eval-mode``; KernelBench's harness, and nodice by default,
runs them in training mode).

``nodice evolve --reference REF.py`` without ``--seed`` starts from the
reference itself: the seed is REF's own source with ``class ModelNew(Model)``
appended, so the first version is exactly ``Model`` (same layers, same weight
names) and the agent rewrites ``ModelNew`` from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodice.errors import ReferenceFileError, UsageError

PREFIX = "reference:"
REFERENCE_ENTRY = "ModelNew"
_AXIS_TAG = "#batch_axis="
_SIZE_TAG = "#batch_size="
_EVAL_TAG = "#eval"


@dataclass(frozen=True)
class ReferenceSpec:
    """How a reference file is made into a task: its batch axis, the batch it is shrunk to, the mode."""

    path: Path
    batch_axis: int = 0
    batch_size: int | None = None  # None: get_inputs()'s own batch
    eval_mode: bool = False  # KernelBench runs modules as constructed: training mode


SEED_WRAPPER = '''

# ---- the seed of the search: the reference Model itself, as ModelNew --------------------
class ModelNew(Model):
    """The reference, unchanged. Rewrite ``forward`` (Triton, CUDA, fused ops) to make it faster."""
'''


def reference_task_name(
    path: str | Path, batch_axis: int = 0, batch_size: int | None = None, eval_mode: bool = False
) -> str:
    """The catalog name of the task built from ``path`` (absolute, so any process can rebuild it)."""
    name = f"{PREFIX}{Path(path).resolve()}"
    if batch_axis:
        name += f"{_AXIS_TAG}{batch_axis}"
    if batch_size is not None:
        name += f"{_SIZE_TAG}{batch_size}"
    return name + (_EVAL_TAG if eval_mode else "")


def task_from_options(
    task: str | None,
    reference: Path | None,
    batch_axis: int | None,
    task_option: str,
    batch_size: int | None = None,
    eval_mode: bool = False,
) -> str:
    """The task a command was given: ``task`` or the one of ``--reference`` (exactly one of them).

    ``task_option`` is how the command spells the task (``--task T``, ``a TASK``) in its error line.
    """
    if (task is None) == (reference is None):
        raise UsageError(f"give either {task_option} or --reference REF.py")
    if reference is None:
        given = [o for o, v in (("--batch-axis", batch_axis), ("--batch-size", batch_size)) if v is not None]
        given += ["--eval-mode"] if eval_mode else []
        if given:
            raise UsageError(
                f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --reference only"
            )
        return str(task)
    if batch_axis is not None and batch_axis < 0:
        raise UsageError(f"--batch-axis must be 0 or more, not {batch_axis}")
    if batch_size is not None and batch_size < 1:
        raise UsageError(f"--batch-size must be 1 or more, not {batch_size}")
    if reference.is_dir():
        raise ReferenceFileError(f"{reference} is a folder: --reference takes one problem file")
    if not reference.is_file():
        raise ReferenceFileError(f"no such file: {reference}")
    return reference_task_name(reference, batch_axis or 0, batch_size, eval_mode)


def is_reference_task(name: str) -> bool:
    return name.startswith(PREFIX)


def parse_task_name(name: str) -> ReferenceSpec:
    """The file and options of a ``reference:`` task name."""
    body = name.removeprefix(PREFIX)
    eval_mode = body.endswith(_EVAL_TAG)
    body = body.removesuffix(_EVAL_TAG)
    numbers: dict[str, int | None] = {_AXIS_TAG: None, _SIZE_TAG: None}
    for tag in (_SIZE_TAG, _AXIS_TAG):  # in the reverse of the order the name lists them
        if tag in body:
            body, _, tail = body.rpartition(tag)
            if not tail.isdigit():
                raise ReferenceFileError(
                    f"bad {tag.strip('#=').replace('_', ' ')} {tail!r} in task name {name!r}"
                )
            numbers[tag] = int(tail)
    return ReferenceSpec(Path(body), numbers[_AXIS_TAG] or 0, numbers[_SIZE_TAG], eval_mode)


def reference_seed(path: Path) -> str:
    """REF's source with ``class ModelNew(Model)`` appended (the search's first version)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceFileError(f"cannot read {path}: {exc}") from None
    if "class ModelNew" in source:
        return source  # the file already carries its own ModelNew
    return source.rstrip("\n") + "\n" + SEED_WRAPPER
