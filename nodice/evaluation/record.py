"""The record of one evaluation: the gate's result, the score vector, timings and environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodice.gate.result import CheckResult
from nodice.measuring.score import WorkloadScore, geomean_ratio_best, headline, score_unit


@dataclass
class Evaluation:
    """Everything known about one candidate after one evaluation.

    ``ms`` is the wall time of the whole evaluation (worker start-up included
    when one was needed); ``timings`` breaks it down by stage.
    """

    check: CheckResult
    scores: list[WorkloadScore]
    ms: float
    task: str
    candidate: str
    sha256: str
    source: str
    seed: int | None = None
    run_id: str | None = None
    device: str = ""
    isolation: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    timestamp: str = ""
    # What the worker printed during the evaluation: its head and tail when long (with a line saying
    # how much was dropped), and a hung worker's Python stacks.
    log: str = ""
    # The benchmark's context: the device's measured ceilings, missing baselines, baselines' BI verdicts.
    bench: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.check.verdict

    @property
    def cheat_rule(self) -> str | None:
        return self.check.cheat_rule

    @property
    def geomean(self) -> float:
        """Geometric mean of the score vector; 0 unless the candidate passed and was benchmarked."""
        if self.verdict != "pass" or not self.scores:
            return 0.0
        return headline(self.scores)

    @property
    def unit(self) -> str | None:
        """What the geomean is measured in (TFLOP/s or GB/s); None before any score."""
        return score_unit(self.scores)

    @property
    def ratio_best(self) -> float | None:
        """Geomean of the per-workload ratios to the fastest baseline measured in the same run."""
        return geomean_ratio_best(self.scores) if self.verdict == "pass" else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "cheat_rule": self.cheat_rule,
            "geomean": self.geomean,
            "unit": self.unit,
            "ratio_best": self.ratio_best,
            "task": self.task,
            "candidate": self.candidate,
            "sha256": self.sha256,
            "seed": self.seed,
            "run_id": self.run_id,
            "device": self.device,
            "isolation": self.isolation,
            "ms": self.ms,
            "timings": dict(self.timings),
            "scores": [s.to_dict() for s in self.scores],
            "check": self.check.to_dict(),
            "environment": dict(self.environment),
            "timestamp": self.timestamp,
            "log": self.log,
            "bench": dict(self.bench),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evaluation:
        return cls(
            check=CheckResult.from_dict(d["check"]),
            scores=[WorkloadScore.from_dict(s) for s in d.get("scores", [])],
            ms=d.get("ms", 0.0),
            task=d["task"],
            candidate=d["candidate"],
            sha256=d.get("sha256", ""),
            source=d.get("source", ""),
            seed=d.get("seed"),
            run_id=d.get("run_id"),
            device=d.get("device", ""),
            isolation=d.get("isolation", ""),
            timings=dict(d.get("timings", {})),
            environment=dict(d.get("environment", {})),
            timestamp=d.get("timestamp", ""),
            log=d.get("log", ""),
            bench=dict(d.get("bench") or {}),
        )
