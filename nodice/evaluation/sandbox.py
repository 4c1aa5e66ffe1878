"""The gate alone in a sandboxed worker, for callers that want a :class:`CheckResult` and nothing else.

Candidates still meet the anti-cheat guards; no benchmark runs and nothing is stored.
"""

from __future__ import annotations

from typing import Any

from nodice.evaluation.evaluate import Evaluator
from nodice.gate.result import CheckResult

DEFAULT_TIMEOUT_S = 300.0


def check_isolated(timeout_s: float = DEFAULT_TIMEOUT_S, **kwargs: Any) -> CheckResult:
    """``nodice.gate.pipeline.check`` semantics, run in a fresh spawned worker with a wall-clock limit."""
    with Evaluator(device=kwargs.pop("device", None), isolation="isolated", timeout_s=timeout_s) as ev:
        return ev.evaluate(kwargs.pop("path"), kwargs.pop("task"), bench=False, **kwargs).check
