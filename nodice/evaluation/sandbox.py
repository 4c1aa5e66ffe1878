"""The gate alone in a sandboxed worker, for callers that want a :class:`CheckResult` and nothing else.

Candidates still meet the anti-cheat guards; no benchmark runs and nothing is stored.
"""

from __future__ import annotations

from pathlib import Path

from nodice.evaluation.evaluate import Evaluator
from nodice.evaluation.request import EvaluationRequest
from nodice.gate.result import CheckResult


def check_isolated(
    path: str | Path,
    task: str,
    *,
    entry: str = "kernel",
    device: str | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
) -> CheckResult:
    """``nodice.gate.pipeline.check`` semantics, run in a fresh spawned worker.

    Time is limited per step (the task's budgets) unless ``timeout_s`` sets one limit on the whole check.
    """
    request = EvaluationRequest.create(path, task, seed=seed, entry=entry, bench=False)
    with Evaluator(device=device, isolation="isolated", timeout_s=timeout_s) as ev:
        return ev.run(request, candidate=str(path)).check
