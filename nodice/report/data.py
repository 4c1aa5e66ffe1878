"""Everything a report shows, read from a run directory (git lineage, journal, configuration).

Scores are throughput in the run's unit (TFLOP/s or GB/s) beside each baseline
measured in the same run. Runs scored by an older nodice (speedup over the
reference, ``legacy``) are read as they were written, with their baselines
converted to speedups by :func:`baseline_entries`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodice.errors import NodiceError
from nodice.evolution.journal import Attempt, Intervention, Journal
from nodice.evolution.lineage import Lineage, VersionRecord
from nodice.evolution.rundir import KERNEL_FILE, RunConfig, RunDir
from nodice.evolution.scores import BaselineLevel, baseline_levels_of, is_legacy, parse, unit_of


class ReportError(NodiceError):
    kind = "cannot write the report"


@dataclass
class VersionView:
    record: VersionRecord
    diff: str
    source: str


@dataclass
class RunData:
    root: Path
    config: RunConfig
    versions: list[VersionView]
    attempts: list[Attempt]
    interventions: list[Intervention]
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def workloads(self) -> list[str]:
        names: list[str] = []
        for a in self.attempts:
            for s in a.scores:
                if s.get("workload") not in names:
                    names.append(str(s.get("workload")))
        return names

    @property
    def unit(self) -> str | None:
        """What the run's scores are in: run.json's unit, else that of the newest scored record."""
        if self.config.unit:
            return self.config.unit
        records = [v.record.scores for v in reversed(self.versions)]
        records += [a.scores for a in reversed(self.attempts)]
        return next((u for u in map(unit_of, records) if u), None)

    @property
    def legacy(self) -> bool:
        """Scored as speedup over the reference by an older nodice (or never scored in a known unit)."""
        return self.unit is None or is_legacy(self.unit)

    def in_unit(self, a: Attempt) -> bool:
        """The attempt's geomean is in the run's unit (a resumed run may hold older, unit-less attempts)."""
        return self.legacy or unit_of(a.scores) in (None, self.unit)

    def baseline_source(self) -> Attempt | None:
        """The latest benchmarked attempt in the run's unit whose baselines cover every workload."""
        return next(
            (
                a
                for a in reversed(self.attempts)
                if a.scores and self.in_unit(a) and baseline_levels_of(a.scores)
            ),
            None,
        )

    def baseline_levels(self) -> list[BaselineLevel]:
        """Each baseline's geomean throughput (and BI verdict) in the latest benchmarked attempt."""
        source = self.baseline_source()
        return baseline_levels_of(source.scores) if source else []

    def workload_baselines(self) -> dict[str, dict[str, Any]]:
        """Per workload, that attempt's baselines as stored (``{name: {throughput, ratio, bi, …}}``)."""
        source = self.baseline_source()
        if source is None:
            return {}
        return {str(s.get("workload")): dict(s.get("baselines") or {}) for s in source.scores}

    def fastest_baselines(self) -> dict[str, tuple[str, float]]:
        """Per workload, the fastest correct baseline of that attempt and its throughput."""
        source = self.baseline_source()
        scores = parse(source.scores) if source else []
        return {
            s.workload: (s.best_baseline, s.baselines[s.best_baseline].throughput)
            for s in scores
            if s.best_baseline in s.baselines
        }

    def legacy_baselines(self) -> dict[str, float]:
        """Legacy runs: geomean speedup of each baseline over the reference (the reference is 1.0)."""
        per_name: dict[str, list[float]] = {"reference": []}
        source = next((a for a in reversed(self.attempts) if a.scores and a.bench), None)
        if source is None:
            return {}
        for s in source.scores:
            per_name["reference"].append(1.0)
            for name, value in baseline_entries(s).items():
                per_name.setdefault(name, []).append(value)
        out: dict[str, float] = {}
        for name, values in per_name.items():
            if values and all(v > 0 for v in values):
                out[name] = math.exp(sum(math.log(v) for v in values) / len(values))
        return out


def baseline_entries(score: dict[str, Any]) -> dict[str, float]:
    """One workload's baselines as scores (speedup over the reference), whatever form they came in.

    A baseline given as a time in ms becomes ``reference_ms / baseline_ms``, with the reference's
    time recovered from the candidate's own ``ms × speedup``.
    """
    raw = score.get("baselines") or {}
    out: dict[str, float] = {}
    ms, speedup = score.get("ms"), score.get("speedup_vs_reference") or score.get("score")
    ref_ms = score.get("reference_ms") or None
    if ref_ms is None and isinstance(ms, (int, float)) and isinstance(speedup, (int, float)):
        ref_ms = ms * speedup
    for name, value in raw.items() if isinstance(raw, dict) else []:
        if name == "reference":
            continue
        if isinstance(value, dict):
            if isinstance(value.get("speedup_vs_reference"), (int, float)):
                out[name] = float(value["speedup_vs_reference"])
            elif isinstance(value.get("score"), (int, float)):
                out[name] = float(value["score"])
            elif isinstance(value.get("ms"), (int, float)) and ref_ms and value["ms"] > 0:
                out[name] = ref_ms / float(value["ms"])
        elif isinstance(value, (int, float)) and value > 0 and ref_ms:
            out[name] = ref_ms / float(value)
    return out


def load_run(root: str | Path) -> RunData:
    run = RunDir(root)
    if not run.exists():
        raise ReportError(f"{run.root} is not a nodice run (no run.json)")
    config = run.load_config()
    lineage = Lineage(run.root)
    records = lineage.versions()
    views: list[VersionView] = []
    previous = lineage.root_commit() if lineage.has_commits() else None
    for rec in records:
        diff = lineage.diff(previous, rec.sha) if previous else ""
        try:
            source = lineage.show(rec.sha, f"workspace/{KERNEL_FILE}")
        except NodiceError:
            source = ""
        views.append(VersionView(rec, diff, source))
        previous = rec.sha
    journal = Journal(run.store_path)
    try:
        attempts, interventions = journal.attempts(), journal.interventions()
    finally:
        journal.close()
    return RunData(run.root, config, views, attempts, interventions, run.load_state())
