"""The score vector f: one entry per workload, the candidate's speedup over the task's reference.

An entry is 0 where the candidate is incorrect; the headline is the geometric
mean, hence 0 as soon as one workload is wrong.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class WorkloadScore:
    """One workload's measurement. Times are medians in milliseconds.

    ``baselines`` maps each named baseline of the task (cuBLAS, cuDNN SDPA, …)
    to its median time measured in the same run; ``score`` is
    ``speedup_vs_reference`` when the output was correct, else 0.
    """

    workload: str
    ms: float
    tflops: float | None
    gbps: float | None
    speedup_vs_reference: float
    baselines: dict[str, float]
    score: float
    reference_ms: float = 0.0
    correct: bool = True
    detail: str = ""
    reps: int = 0
    timer: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def speedup_vs_baselines(self) -> dict[str, float]:
        """The candidate's speedup over each baseline (baseline time / candidate time)."""
        if self.ms <= 0:
            return {k: 0.0 for k in self.baselines}
        return {k: v / self.ms for k, v in self.baselines.items()}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speedup_vs_baselines"] = self.speedup_vs_baselines
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkloadScore:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def headline(scores: list[WorkloadScore]) -> float:
    """Geometric mean of the score vector (0 when empty or when any entry is 0)."""
    values = [s.score for s in scores]
    if not values or any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))
