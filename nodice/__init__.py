"""nodice: a batch-invariance gate and evolutionary search for GPU kernels.

Heavy modules (torch, triton) load on first use, so ``nodice --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["CheckResult", "Finding", "Mismatch", "StageResult", "check"]

if TYPE_CHECKING:
    from nodice.gate.pipeline import check
    from nodice.gate.result import CheckResult, Finding, Mismatch, StageResult


def __getattr__(name: str) -> Any:
    if name == "check":
        from nodice.gate.pipeline import check

        return check
    if name in ("CheckResult", "Finding", "Mismatch", "StageResult"):
        from nodice.gate import result

        return getattr(result, name)
    raise AttributeError(f"module 'nodice' has no attribute {name!r}")
