"""The gate alone in a sandboxed worker, for callers that want a :class:`CheckResult` and nothing else.

Candidates still meet the anti-cheat guards; no benchmark runs and nothing is stored.
"""

from __future__ import annotations

from typing import Any

from nodice.evaluation.evaluate import Evaluator
from nodice.gate.result import CheckResult


def check_isolated(timeout_s: float | None = None, **kwargs: Any) -> CheckResult:
    """``nodice.gate.pipeline.check`` semantics, run in a fresh spawned worker.

    Time is limited per step (the task's budgets) unless ``timeout_s`` sets one limit on the whole check.
    """
    with Evaluator(device=kwargs.pop("device", None), isolation="isolated", timeout_s=timeout_s) as ev:
        return ev.evaluate(kwargs.pop("path"), kwargs.pop("task"), bench=False, **kwargs).check
