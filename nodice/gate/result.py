"""Typed results of the gate; ``to_dict`` gives the JSON that SPEC §4 pins."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from nodice.errors import NodiceError

Verdict = Literal["pass", "bi_violation", "incorrect", "cheat", "not_applicable", "error"]
StageVerdict = Literal["pass", "reject", "error", "skipped", "unresolved"]

# Exit codes of `nodice check` (SPEC §4).
EXIT_PASS, EXIT_REJECTED, EXIT_ERROR = 0, 1, 2


class CheatDetected(NodiceError):
    """A candidate games the harness instead of computing the operation; ``rule`` names the guard."""

    kind = "cheat"

    def __init__(self, rule: str, detail: str):
        super().__init__(detail)
        self.rule = rule

    def line(self) -> str:
        return f"cheat ({self.rule}): {self}"


@dataclass
class Finding:
    """One static-analysis finding: a batch-derived value reaching a protected sink."""

    rule: str
    mechanism: str
    protected: str
    file: str
    line: int
    message: str
    path: list[str] = field(default_factory=list)
    guidance: str = ""
    # "cleared": a batch-dependent choice between algorithms whose two sides both ran in dynamic
    # validation and gave every tracked sample the same bits (nodice.gate.branches).
    severity: Literal["violation", "unresolved", "cleared"] = "violation"
    # Where a choice between algorithms sits (nodice.gate.static.branches), for the dynamic stage.
    branch: dict[str, Any] | None = None


@dataclass
class Mismatch:
    """The first bitwise difference dynamic validation found."""

    context: dict[str, Any]
    sample: str
    output: str
    index: list[int]
    expected: float
    got: float
    differing: int
    total: int

    def line(self) -> str:
        ctx = self.context.get("name", "")
        if self.context.get("inputs"):
            ctx = f"{ctx} ({self.context['inputs']})"
        nans = all(isinstance(v, float) and math.isnan(v) for v in (self.expected, self.got))
        # Two NaNs print alike: what differs is their bits (sign or payload), so say that.
        values = (
            "expected nan, got a NaN with other bits"
            if nans
            else f"expected {self.expected!r}, got {self.got!r}"
        )
        where = f"{self.output}{self.index}" if self.index else self.output  # a 0-d output: no index
        return (
            f"{self.sample} differs in context {ctx}: {where} {values} "
            f"({self.differing}/{self.total} elements differ)"
        )


@dataclass
class StageResult:
    name: str
    verdict: StageVerdict
    ms: float
    detail: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckResult:
    verdict: Verdict
    task: str
    candidate: str
    device: str
    dtype: str
    stages: list[StageResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    mismatch: Mismatch | None = None
    error: str | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    # Name of the anti-cheat rule that fired when ``verdict == "cheat"``.
    cheat_rule: str | None = None

    @property
    def exit_code(self) -> int:
        if self.verdict == "pass":
            return EXIT_PASS
        if self.verdict in ("error", "not_applicable"):  # no candidate was judged
            return EXIT_ERROR
        return EXIT_REJECTED

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)

    def not_applicable(self, exc: NodiceError) -> None:
        """The operator couples its samples: nothing about the candidate is judged (SPEC §4)."""
        self.verdict, self.reason, self.error = "not_applicable", exc.line(), exc.line()

    def reject_as_cheat(self, cheat: CheatDetected) -> None:
        """The one way a guard's finding becomes the verdict: ``cheat``, its rule, its line as the reason."""
        self.verdict, self.cheat_rule, self.reason, self.error = "cheat", cheat.rule, cheat.line(), None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stages"] = {s.name: {k: v for k, v in asdict(s).items() if k != "name"} for s in self.stages}
        d["exit_code"] = self.exit_code
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckResult:
        stages = [StageResult(name=k, **v) for k, v in d.get("stages", {}).items()]
        mismatch = Mismatch(**d["mismatch"]) if d.get("mismatch") else None
        return cls(
            verdict=d["verdict"],
            task=d["task"],
            candidate=d["candidate"],
            device=d["device"],
            dtype=d["dtype"],
            stages=stages,
            findings=[Finding(**f) for f in d.get("findings", [])],
            mismatch=mismatch,
            error=d.get("error"),
            reason=d.get("reason", ""),
            notes=list(d.get("notes", [])),
            cheat_rule=d.get("cheat_rule"),
        )
