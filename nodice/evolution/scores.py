"""The score vector as evolution keeps it: plain dicts in journal rows, git notes and trailers.

Everything the run shows about a score — the live view, the agent's feedback,
commit subjects, the report — reads it back through here, so a geomean is
always said with its unit, its ratio to the fastest baseline and the fraction
of the device's ceiling it reached ("3012 GB/s (0.93× best baseline, 71% of
copy bandwidth)").

Records written before throughput scores carry no unit: their score was the
speedup over the task's reference (``LEGACY_UNIT``). A geomean in one unit is
meaningless against one in another, so a run whose lineage is in another unit
than its task's cannot be continued (:func:`refuse_incomparable`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nodice.errors import NodiceError
from nodice.measuring.score import (
    GBPS,
    LEGACY_UNIT,
    TFLOPS,
    WorkloadScore,
    baseline_levels,
    geomean,
    geomean_ratio_best,
    score_unit,
)

# The ceiling a fraction of the limit is taken of, by unit (measured on the device:
# nodice.measuring.ceilings).
LIMIT_NAMES = {TFLOPS: "dense matmul peak", GBPS: "copy bandwidth"}


class IncomparableScoresError(NodiceError):
    """The run's committed versions were scored in another unit than the one its task scores in now."""

    kind = "cannot resume"


@dataclass(frozen=True)
class BaselineLevel:
    """One baseline's geomean throughput over the workloads, with its own BI verdict when it was audited."""

    name: str
    value: float
    bi: str | None = None


def task_unit(task: str) -> str:
    """The unit the task scores in now (imports the task, and PyTorch with it)."""
    from nodice.tasks import get_task

    return get_task(task).unit


def score_dicts(scores: Sequence[Any]) -> list[dict[str, Any]]:
    """Per-workload scores as plain dicts (the evaluation service's dataclasses, or dicts already)."""
    out: list[dict[str, Any]] = []
    for s in scores:
        if isinstance(s, WorkloadScore):
            out.append(s.to_dict())
        elif dataclasses.is_dataclass(s) and not isinstance(s, type):
            out.append(dataclasses.asdict(s))
        elif isinstance(s, dict):
            out.append(dict(s))
    return out


def parse(scores: Sequence[dict[str, Any]]) -> list[WorkloadScore]:
    """The dicts as :class:`WorkloadScore` (trailer-only records have no time: it reads as 0)."""
    return [WorkloadScore.from_dict({"ms": 0.0, "workload": "?", **s}) for s in scores]


def unit_of(scores: Sequence[dict[str, Any]]) -> str | None:
    """The unit of a record's scores (``LEGACY_UNIT`` for records without one); None when it has none."""
    return score_unit(list(scores))


def is_legacy(unit: str | None) -> bool:
    return unit == LEGACY_UNIT


def ratio_best_of(scores: Sequence[dict[str, Any]]) -> float | None:
    """Geomean of the per-workload ratios to the fastest baseline; None if one workload has none."""
    return geomean_ratio_best(parse(scores)) if scores else None


def limit_fraction_of(scores: Sequence[dict[str, Any]]) -> float | None:
    """Geomean fraction of the device's ceiling: the geomean throughput over the (fixed) ceiling."""
    fractions = [s.get("limit_fraction") for s in scores]
    if not fractions or not all(isinstance(f, (int, float)) and f > 0 for f in fractions):
        return None
    return geomean([float(f) for f in fractions if f is not None])


def baseline_levels_of(scores: Sequence[dict[str, Any]]) -> list[BaselineLevel]:
    """Each baseline measured on every workload: its geomean throughput and BI verdict, fastest first."""
    parsed = parse(scores)
    levels = []
    for name, value in baseline_levels(parsed).items():
        verdict = next((s.baselines[name].bi for s in parsed if s.baselines[name].bi), None)
        levels.append(BaselineLevel(name, value, verdict))
    return sorted(levels, key=lambda b: -b.value)


def value_text(value: float, unit: str | None) -> str:
    """``3012 GB/s``; ``1.35× reference`` for legacy speedups; the bare number when the unit is unknown."""
    if not unit:
        return f"{value:.4g}"
    return f"{value:.4g}{unit}" if is_legacy(unit) else f"{value:.4g} {unit}"


def ratio_text(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.2g}×"


def percent_text(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if fraction >= 0.01 else f"{fraction * 100:.2g}%"


def limit_text(fraction: float, unit: str | None) -> str:
    """``71% of copy bandwidth``."""
    return f"{percent_text(fraction)} of {LIMIT_NAMES.get(unit or '', 'the device limit')}"


def standing_text(
    value: float, unit: str | None, ratio_best: float | None = None, limit_fraction: float | None = None
) -> str:
    """``3012 GB/s (0.93× best baseline, 71% of copy bandwidth)``: where a geomean stands."""
    extras = []
    if ratio_best is not None:
        extras.append(f"{ratio_text(ratio_best)} best baseline")
    if limit_fraction is not None:
        extras.append(limit_text(limit_fraction, unit))
    return value_text(value, unit) + (f" ({', '.join(extras)})" if extras else "")


def standing_of(scores: Sequence[dict[str, Any]], value: float) -> str:
    """:func:`standing_text` of a record, from its scores."""
    return standing_text(value, unit_of(scores), ratio_best_of(scores), limit_fraction_of(scores))


def score_brief(unit: str) -> str:
    """How the score is measured, so the agent knows what a number means and what to beat."""
    what = "floating-point operations" if unit == TFLOPS else "bytes read and written"
    return (
        f"Score: on each workload, the kernel's throughput in {unit} ({what} per second; higher is "
        "better), 0 if it is wrong there; the headline is the geometric mean. Every evaluation also "
        f"measures the library baselines in the same run and reports each one's {unit}, your ratio to "
        f"each and to the fastest (> 1× beats it), and the fraction of the device's measured "
        f"{LIMIT_NAMES.get(unit, 'limit')} you reach (the physical ceiling)."
    )


def refuse_incomparable(shown_root: str, units: Sequence[str | None], unit: str) -> None:
    """Raise when a committed version was scored in another unit than ``unit`` (its geomean cannot be beaten
    or matched by a number in a different unit). ``shown_root`` is the run directory as the user named it."""
    other = next((u for u in units if u and u != unit), None)
    if other is None:
        return
    how = "as speedup over the reference by an older nodice" if is_legacy(other) else f"in {other}"
    raise IncomparableScoresError(
        f"{shown_root} was scored {how}; scores in {unit} cannot be compared with it: "
        f"start a new run (--run-dir NEW --seed {shown_root}/workspace/kernel.py)"
    )
