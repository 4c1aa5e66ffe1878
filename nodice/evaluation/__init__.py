"""Evaluation service: sandboxed workers, anti-cheat guards, benchmarking, score vectors, result store.

Every caller asks the same way: an :class:`EvaluationRequest` (what to judge, which stages,
whether guards and the benchmark run) to an :class:`Evaluator` (where it runs: a fresh worker
process, a reused one, a Ray node, or this process under ``isolation="inline"``). The caller's
process stays light (no torch import) unless it asks for ``inline``.
"""

from __future__ import annotations

from nodice.evaluation.evaluate import Evaluator
from nodice.evaluation.record import Evaluation
from nodice.evaluation.request import BenchOptions, EvaluationRequest
from nodice.measuring.score import WorkloadScore

__all__ = ["BenchOptions", "Evaluation", "EvaluationRequest", "Evaluator", "WorkloadScore"]
