"""Evaluation service: sandboxed workers, anti-cheat guards, benchmarking, score vectors, result store.

The caller's process stays light (no torch import): everything that touches a
candidate runs in a worker process.
"""

from __future__ import annotations

from nodice.evaluation.evaluate import Evaluator
from nodice.evaluation.record import Evaluation
from nodice.measuring.score import WorkloadScore

__all__ = ["Evaluation", "Evaluator", "WorkloadScore"]
