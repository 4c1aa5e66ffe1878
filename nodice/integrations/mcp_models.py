"""The typed results of nodice's MCP tools (their output schemas), built from the run's own records.

Every result carries ``summary``: the compact text an agent reads (the same words the `nodice run`
commands print), so a client that shows only structured content still shows the diagnostics.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from nodice.evolution.journal import Attempt
from nodice.evolution.lineage import VersionRecord
from nodice.evolution.status import RunStatus


class Finding(BaseModel):
    """A static finding: a batch-derived value reaching a protected parameter, and how to repair it."""

    mechanism: str = Field(description="work_partitioning, reduction_order, algorithm_selection, rng, …")
    protected: str = Field(description="the protected parameter or sink it reaches")
    severity: str = Field(description="violation, unresolved (left to the dynamic stage) or cleared")
    file: str
    line: int
    message: str
    path: list[str] = Field(description="the dependency path, from the batch source to the sink")
    repair: str = Field(description="how to remove the dependence")


class Mismatch(BaseModel):
    """The first bitwise difference dynamic validation found for the target sample."""

    line: str = Field(description="the mismatch in one line")
    context: dict[str, Any] = Field(description="the batch the target sample ran in")
    output: str
    index: list[int]
    expected: float
    got: float
    differing: int
    total: int


class Baseline(BaseModel):
    throughput: float
    ratio: float = Field(description="the candidate's throughput over this baseline's (> 1: faster)")
    bi: str | None = Field(None, description="the baseline's own batch-invariance verdict on this device")


class WorkloadScore(BaseModel):
    workload: str
    score: float = Field(description="throughput in the run's unit, 0 when the output is incorrect")
    correct: bool
    ms: float | None = None
    limit_fraction: float | None = Field(None, description="fraction of the device's measured ceiling")
    ratio_best: float | None = Field(None, description="ratio to the fastest correct baseline")
    baselines: dict[str, Baseline] = Field(default_factory=dict)


class EvaluationResult(BaseModel):
    """One evaluation of the workspace, journaled in the run's store as attempt ``attempt``."""

    summary: str
    attempt: int
    verdict: str = Field(description="pass, bi_violation, incorrect, cheat or error")
    outcome: str = Field(description="eligible, committed, slower, gate_only, or the rejection")
    reason: str
    stages: dict[str, str] = Field(description="each gate stage's verdict")
    findings: list[Finding] = Field(default_factory=list)
    mismatch: Mismatch | None = None
    error: str | None = None
    geomean: float = Field(description="the headline score: geometric mean of the workload scores")
    unit: str | None = None
    scores: list[WorkloadScore] = Field(default_factory=list)
    best_before: float = Field(description="the best committed geomean when it was judged")

    @classmethod
    def of(cls, attempt: Attempt) -> EvaluationResult:
        check = attempt.check or {}
        mismatch = check.get("mismatch")
        return cls(
            summary=f"attempt #{attempt.id}\n{attempt.feedback}",
            attempt=attempt.id,
            verdict=attempt.verdict,
            outcome=attempt.outcome,
            reason=attempt.reason,
            stages=attempt.stages,
            findings=[_finding(f) for f in check.get("findings", [])],
            mismatch=_mismatch(mismatch) if mismatch else None,
            error=check.get("error"),
            geomean=attempt.geomean,
            unit=next((s.get("unit") for s in attempt.scores if s.get("unit")), None),
            scores=[_score(s) for s in attempt.scores],
            best_before=attempt.best_before,
        )


class CommitResult(BaseModel):
    summary: str
    committed: bool
    version: int | None = Field(None, description="the new version, when committed")
    evaluation: EvaluationResult | None = Field(None, description="the attempt the decision rests on")


class Version(BaseModel):
    version: int
    sha: str
    geomean: float
    unit: str | None
    ratio_best: float | None
    description: str
    agent: str
    island: int | None
    scores: dict[str, float] = Field(description="score per workload")

    @classmethod
    def of(cls, v: VersionRecord) -> Version:
        return cls(
            version=v.version,
            sha=v.sha,
            geomean=v.geomean,
            unit=v.unit,
            ratio_best=v.ratio_best,
            description=v.description,
            agent=v.agent,
            island=v.island,
            scores={str(s.get("workload")): float(s.get("score") or 0.0) for s in v.scores},
        )


class Lineage(BaseModel):
    summary: str
    versions: list[Version] = Field(description="committed versions, oldest first; the last is the best")


class Text(BaseModel):
    """A tool whose answer is text: a source, a diff, knowledge, a profile, a file."""

    summary: str


class Status(BaseModel):
    summary: str
    task: str
    device: str
    bi: bool = Field(description="false for a vanilla run (--no-bi): commits need correctness and speed")
    evaluations: int
    evaluations_left: int | None
    versions: int
    best: Version | None
    rejections: dict[str, int]
    direction: str = Field(description="the supervisor's latest direction, empty before any")
    direction_text: str

    @classmethod
    def of(cls, status: RunStatus, best: VersionRecord | None) -> Status:
        fields = {k: v for k, v in status.to_dict().items() if k in cls.model_fields and k != "best"}
        return cls(summary=status.text(), best=Version.of(best) if best else None, **fields)


def _finding(f: dict[str, Any]) -> Finding:
    return Finding(
        mechanism=f["mechanism"],
        protected=f["protected"],
        severity=f.get("severity", "violation"),
        file=f["file"],
        line=f["line"],
        message=f["message"],
        path=list(f.get("path") or []),
        repair=f.get("guidance") or "",
    )


def _mismatch(m: dict[str, Any]) -> Mismatch:
    from nodice.gate.result import Mismatch as GateMismatch

    return Mismatch(line=GateMismatch(**m).line(), **{k: m[k] for k in Mismatch.model_fields if k in m})


def _score(s: dict[str, Any]) -> WorkloadScore:
    baselines = s.get("baselines") if isinstance(s.get("baselines"), dict) else {}
    return WorkloadScore(
        workload=str(s.get("workload", "?")),
        score=float(s.get("score") or 0.0),
        correct=bool(s.get("correct", True)),
        ms=s.get("ms"),
        limit_fraction=s.get("limit_fraction"),
        ratio_best=s.get("ratio_best"),
        baselines={
            name: Baseline(
                throughput=float(b.get("throughput") or 0.0),
                ratio=float(b.get("ratio") or 0.0),
                bi=b.get("bi"),
            )
            for name, b in (baselines or {}).items()
            if isinstance(b, dict)
        },
    )
