"""The fastest kernels nodice has verified, one module per task.

``bundled_kernel(task)`` is the file ``nodice bench kernels`` benchmarks for a
task: ``nodice/kernels/<task>.py`` once evolution has found a kernel faster
than the task's seed, the seed (``nodice/examples/<task>/seed.py``) until then.
Every bundled kernel has a pinned configuration that depends on no batch
dimension; the benchmark runs the whole gate on it on the device it measures.

``enable_batch_invariant_mode()`` (:mod:`nodice.kernels.mode`) routes torch
ops to these kernels once the gate has passed them on the device; it loads on
first use, so that importing this package stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import NodiceError

if TYPE_CHECKING:
    from nodice.kernels.mode import (
        BatchInvariantMode,
        ModeReport,
        OpStatus,
        disable_batch_invariant_mode,
        enable_batch_invariant_mode,
        is_batch_invariant_mode_enabled,
    )

_MODE_NAMES = (
    "BatchInvariantMode",
    "ModeReport",
    "OpStatus",
    "disable_batch_invariant_mode",
    "enable_batch_invariant_mode",
    "is_batch_invariant_mode_enabled",
)

__all__ = [
    "EXAMPLES_DIR",
    "KERNELS_DIR",
    "BatchInvariantMode",
    "ModeReport",
    "OpStatus",
    "bundled_kernel",
    "disable_batch_invariant_mode",
    "enable_batch_invariant_mode",
    "is_batch_invariant_mode_enabled",
    "is_seed",
]

KERNELS_DIR = Path(__file__).resolve().parent
EXAMPLES_DIR = KERNELS_DIR.parent / "examples"


def bundled_kernel(task: str) -> Path:
    """The current best bundled kernel of ``task`` (its own module, else the seed)."""
    own = KERNELS_DIR / f"{task}.py"
    if own.is_file():
        return own
    seed = EXAMPLES_DIR / task / "seed.py"
    if seed.is_file():
        return seed
    raise NodiceError(f"no bundled kernel for task '{task}'")


def is_seed(path: Path) -> bool:
    return path.name == "seed.py" and path.parent.parent == EXAMPLES_DIR


def __getattr__(name: str) -> Any:
    if name in _MODE_NAMES:
        from nodice.kernels import mode

        return getattr(mode, name)
    raise AttributeError(f"module 'nodice.kernels' has no attribute {name!r}")
