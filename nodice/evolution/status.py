"""Where a run stands: budget, best version, rejections, the supervisor's direction, islands.

One function answers it for ``nodice run status`` and the MCP server's ``status`` tool.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from nodice.evolution.directions import direction
from nodice.evolution.scores import standing_text
from nodice.evolution.session import RunSession


@dataclass
class RunStatus:
    task: str
    device: str
    bi: bool
    evaluations: int
    evaluations_left: int | None
    versions: int
    best: dict[str, Any] | None
    rejections: dict[str, int]
    # The supervisor's latest direction (its name and what it asks), empty before any intervention.
    direction: str = ""
    direction_text: str = ""
    # Evaluations and commits of each island, when several agents share the lineage.
    islands: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        mode = "" if self.bi else " (vanilla: commits need correctness and speed only)"
        lines = [
            f"task {self.task} on {self.device}{mode}",
            f"evaluations: {self.evaluations}, left: {self.evaluations_left}",
        ]
        if self.best:
            best = self.best
            standing = standing_text(best["geomean"], best.get("unit"), best.get("ratio_best"))
            lines.append(f"best: v{best['version']} geomean {standing} — {best['description']}")
        lines.append(f"rejections: {self.rejections or 'none'}")
        if self.direction:
            lines.append(f"direction: {self.direction} — {self.direction_text}")
        for number, counts in self.islands.items():
            lines.append(f"island {number}: {counts['evaluations']} evaluations, {counts['commits']} commits")
        return "\n".join(lines)


def run_status(session: RunSession) -> RunStatus:
    versions = session.versions()
    interventions = session.journal.interventions()
    current = interventions[-1].chosen if interventions else ""
    return RunStatus(
        task=session.config.task,
        device=session.config.device,
        bi=session.config.bi,
        evaluations=session.evaluations_done(),
        evaluations_left=session.evaluations_left(),
        versions=len(versions),
        best=versions[-1].to_dict() if versions else None,
        rejections=session.journal.rejections_by_reason(),
        direction=current,
        direction_text=direction(current).text if current else "",
        islands=_island_counts(session),
    )


def _island_counts(session: RunSession) -> dict[str, dict[str, int]]:
    done = session.journal.count_by_island()
    commits: dict[int, int] = {}
    for v in session.versions():
        if v.island is not None:
            commits[v.island] = commits.get(v.island, 0) + 1
    return {
        str(k): {"evaluations": done.get(k, 0), "commits": commits.get(k, 0)}
        for k in sorted(set(done) | set(commits))
    }
