"""Where a running gate is and that it is moving, for whoever watches it for hangs.

The gate and the benchmark announce each stage (``stage``) and each step inside
one (``step``): a kernel call, a chunk of timed calls, or the harness's own
work such as a library baseline's first call (``step("harness")``). Nothing
listens by default, so these cost a function call; the sandbox's worker
installs a listener that forwards them to its parent, which gives every step a
budget and names the stage when one runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

StepKind = Literal["call", "harness"]


class _Listeners:
    """One object whose attributes change, so the module's own attributes never do.

    The harness-tampering guard compares nodice's module attributes before and
    after every candidate.
    """

    def __init__(self) -> None:
        self.on_stage: Callable[[str], None] | None = None
        self.on_step: Callable[[StepKind], None] | None = None


_LISTENERS = _Listeners()


def listen(on_stage: Callable[[str], None] | None, on_step: Callable[[StepKind], None] | None) -> None:
    """Install (or, with ``None``, remove) the listeners of this process."""
    _LISTENERS.on_stage, _LISTENERS.on_step = on_stage, on_step


def stage(name: str) -> None:
    """A stage begins: ``reference``, ``static``, ``baselines``, ``load``, ``guards``, ``correctness``,
    ``dynamic``, ``bench:<workload>``, ``health``."""
    if _LISTENERS.on_stage is not None:
        _LISTENERS.on_stage(name)


def step(kind: StepKind = "call") -> None:
    """A step of the current stage begins (a kernel call unless ``kind`` says it is the harness's work)."""
    if _LISTENERS.on_step is not None:
        _LISTENERS.on_step(kind)
