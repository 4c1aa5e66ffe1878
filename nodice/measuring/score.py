"""The score vector f: one entry per workload, the candidate's throughput in the task's unit.

TFLOP/s for compute-bound tasks (attention prefill, gemm, moe, linear
attention), GB/s for memory-bound ones (norms, decode, sampling). An entry is 0
where the candidate is incorrect; the headline is the geometric mean, hence 0
as soon as one workload is wrong. Each entry also carries every baseline
measured in the same run (its time, throughput, BI verdict), the candidate's
ratio to each and to the fastest, and the fraction of the device's measured
ceiling (dense matmul peak or copy bandwidth) that the candidate reached.

Records written before throughput scores (``unit`` absent) scored the speedup
over the task's fp32 reference; :func:`score_unit` tells them apart so old run
directories still open.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

TFLOPS = "TFLOP/s"
GBPS = "GB/s"
# The unit of records made before throughput scores: speedup over the task's fp32 reference.
LEGACY_UNIT = "× reference"
UNITS = (TFLOPS, GBPS)


@dataclass
class BaselineScore:
    """One library baseline on one workload, measured in the same run as the candidate.

    ``ratio`` is the candidate's throughput over this baseline's (> 1: the
    candidate is faster). ``bi`` is the baseline's own verdict from the gate's
    dynamic stage on this device (``None`` when it was not audited).
    """

    ms: float
    throughput: float
    ratio: float = 0.0
    bi: str | None = None
    correct: bool = True
    detail: str = ""

    @classmethod
    def from_value(cls, value: Any) -> BaselineScore | None:
        if isinstance(value, dict):
            known = {k: v for k, v in value.items() if k in cls.__dataclass_fields__}
            known.setdefault("ms", 0.0)
            known.setdefault("throughput", 0.0)
            return cls(**known)
        if isinstance(value, (int, float)):  # legacy records: a baseline was its time in ms
            return cls(ms=float(value), throughput=0.0)
        return None


@dataclass
class WorkloadScore:
    """One workload's measurement. Times are medians in milliseconds.

    ``score`` is ``throughput`` (in ``unit``) when the output was correct, else 0.
    """

    workload: str
    ms: float
    unit: str = TFLOPS
    throughput: float = 0.0
    score: float = 0.0
    tflops: float | None = None
    gbps: float | None = None
    baselines: dict[str, BaselineScore] = field(default_factory=dict)
    best_baseline: str | None = None
    ratio_best: float | None = None
    limit_fraction: float | None = None
    # GB/s tasks on CUDA: the throughput over a device copy of the same bytes timed beside it (1.0:
    # as fast as one copy launch of that size; the device limit is a large copy's).
    copy_fraction: float | None = None
    correct: bool = True
    detail: str = ""
    reps: int = 0
    timer: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Host lines of the candidate's file its checked call ran (when the evaluation asked for them).
    lines_run: list[int] | None = None
    # Legacy records only: the speedup over the reference that was their score.
    speedup_vs_reference: float | None = None
    reference_ms: float | None = None

    def set_baselines(self, baselines: dict[str, BaselineScore]) -> None:
        """Attach baselines and derive the candidate's ratio to each and to the fastest correct one."""
        self.baselines = dict(baselines)
        for b in self.baselines.values():
            b.ratio = self.score / b.throughput if b.throughput > 0 else 0.0
        usable = {n: b for n, b in self.baselines.items() if b.correct and b.throughput > 0}
        if usable:
            self.best_baseline = max(usable, key=lambda n: usable[n].throughput)
            self.ratio_best = self.score / usable[self.best_baseline].throughput
        else:
            self.best_baseline, self.ratio_best = None, None

    @property
    def is_legacy(self) -> bool:
        return self.unit == LEGACY_UNIT

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.lines_run is None:
            d.pop("lines_run")
        if not self.is_legacy:
            d.pop("speedup_vs_reference")
            d.pop("reference_ms")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkloadScore:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        raw = known.pop("baselines", None) or {}
        if "unit" not in d:
            known["unit"] = LEGACY_UNIT
            known.setdefault("speedup_vs_reference", d.get("score"))
        out = cls(**known)
        if isinstance(raw, dict):
            for name, value in raw.items():
                b = BaselineScore.from_value(value)
                if b is not None:
                    out.baselines[name] = b
        return out


def headline(scores: list[WorkloadScore]) -> float:
    """Geometric mean of the score vector (0 when empty or when any entry is 0)."""
    return geomean([s.score for s in scores])


def geomean(values: list[float]) -> float:
    if not values or any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_ratio_best(scores: list[WorkloadScore]) -> float | None:
    """Geometric mean of the per-workload ratios to the fastest baseline (None if any is missing)."""
    ratios = [s.ratio_best for s in scores]
    if not ratios or any(r is None for r in ratios):
        return None
    return geomean([float(r) for r in ratios if r is not None])


def baseline_levels(scores: list[WorkloadScore]) -> dict[str, float]:
    """Each baseline's geomean throughput over the workloads where it was measured on all of them."""
    names: list[str] = []
    for s in scores:
        names += [n for n in s.baselines if n not in names]
    out: dict[str, float] = {}
    for name in names:
        values = [s.baselines[name].throughput for s in scores if name in s.baselines]
        if len(values) == len(scores) and all(v > 0 for v in values):
            out[name] = geomean(values)
    return out


def score_unit(scores: list[dict[str, Any]] | list[WorkloadScore]) -> str | None:
    """The unit a list of score records is in (``LEGACY_UNIT`` for pre-throughput records), None if empty."""
    for s in scores:
        unit = s.unit if isinstance(s, WorkloadScore) else (s.get("unit") or LEGACY_UNIT)
        return str(unit)
    return None
