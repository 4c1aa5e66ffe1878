"""nodice: a batch-invariance gate and evolutionary search for GPU kernels."""

from __future__ import annotations

from nodice.gate.pipeline import check
from nodice.gate.result import CheckResult, Finding, Mismatch, StageResult

__all__ = ["CheckResult", "Finding", "Mismatch", "StageResult", "check"]
__version__ = "0.1.0"
