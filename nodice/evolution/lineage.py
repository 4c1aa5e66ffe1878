"""The lineage: every committed version is a git commit of the workspace, carrying its scores.

The commit message holds a human summary ("v3: 3012 GB/s geomean (0.93× best
baseline)") and machine trailers (version, attempt, geomean and its unit, the
ratio to the best baseline, verdict, per-workload throughput); a git note under
``refs/notes/nodice`` holds the full record as JSON. Reading the lineage back
needs nothing but git, so the run can be rebuilt from the repository alone.

A commit without ``Nodice-Unit`` (or a note without ``unit``) was written
before throughput scores: its geomean is a speedup over the reference.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nodice.errors import NodiceError
from nodice.evolution.scores import ratio_text, unit_of, value_text
from nodice.measuring.score import LEGACY_UNIT

NOTES_REF = "nodice"
# Identity and settings that make commits work on any machine, whatever its git config.
_GIT_CONFIG = (
    "-c",
    "user.name=nodice",
    "-c",
    "user.email=nodice@localhost",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.hooksPath=/dev/null",
)


class LineageError(NodiceError):
    kind = "git lineage"


@dataclass
class VersionRecord:
    """One committed version: what it scored and how it got through the gate."""

    version: int
    attempt: int
    geomean: float
    verdict: str
    stages: dict[str, str]
    scores: list[dict[str, Any]]
    description: str
    agent: str
    created: float
    sha: str = ""
    parent_version: int | None = None
    files: list[str] = field(default_factory=list)
    # What ``geomean`` and the scores are measured in: TFLOP/s, GB/s, or LEGACY_UNIT for old records.
    unit: str = ""
    # Geomean of the per-workload ratios to the fastest baseline (None when a workload had none).
    ratio_best: float | None = None
    # The island whose agent proposed it, when several share the lineage.
    island: int | None = None
    # False when read back from the trailers alone (its note was lost to a kill before it was written).
    noted: bool = field(default=True, compare=False)

    def trailers(self) -> list[tuple[str, str]]:
        stages = " ".join(f"{k}={v}" for k, v in self.stages.items())
        scores = " ".join(f"{s['workload']}={s.get('score', 0.0):.6g}" for s in self.scores)
        return [
            ("Nodice-Version", str(self.version)),
            ("Nodice-Attempt", str(self.attempt)),
            ("Nodice-Geomean", f"{self.geomean:.6g}"),
            ("Nodice-Unit", self.unit or "-"),
            ("Nodice-Ratio-Best", "-" if self.ratio_best is None else f"{self.ratio_best:.6g}"),
            ("Nodice-Verdict", self.verdict),
            ("Nodice-Stages", stages or "-"),
            ("Nodice-Scores", scores or "-"),
            ("Nodice-Agent", self.agent),
            *([("Nodice-Island", str(self.island))] if self.island is not None else []),
        ]

    def message(self, best_before: float | None) -> str:
        if best_before and best_before > 0:
            gain = f" ({(self.geomean / best_before - 1) * 100:+.1f}% over the best before)"
        else:
            gain = ""
        versus = "" if self.ratio_best is None else f" ({ratio_text(self.ratio_best)} best baseline)"
        subject = f"v{self.version}: {value_text(self.geomean, self.unit)} geomean{versus}{gain}"
        body = self.description.strip() or "(no description)"
        trailers = "\n".join(f"{k}: {v}" for k, v in self.trailers())
        return f"{subject}\n\n{body}\n\n{trailers}\n"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("noted")
        return d

    @property
    def is_legacy(self) -> bool:
        return self.unit == LEGACY_UNIT

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionRecord:
        rec = cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
        if "unit" not in d:
            rec.unit = unit_of(rec.scores) or LEGACY_UNIT
        return rec


class Lineage:
    """Git operations on the run directory, through the git command line."""

    def __init__(self, root: Path):
        self.root = root

    def git(self, *args: str, check: bool = True, input_text: str | None = None) -> str:
        try:
            proc = subprocess.run(
                ["git", *_GIT_CONFIG, *args],
                cwd=self.root,
                capture_output=True,
                text=True,
                input=input_text,
                timeout=60,
            )
        except FileNotFoundError:
            raise LineageError("git is not installed") from None
        if check and proc.returncode != 0:
            raise LineageError(f"git {args[0]} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return proc.stdout

    def init(self) -> None:
        if (self.root / ".git").is_dir():
            return
        self.git("init", "-q")
        self.git("symbolic-ref", "HEAD", "refs/heads/main")

    def has_commits(self) -> bool:
        return bool(self.git("rev-parse", "--verify", "-q", "HEAD", check=False).strip())

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def clear_stale_locks(self) -> list[str]:
        """Remove lock files a killed git left behind. Call only while holding the run's write lock."""
        git_dir = self.root / ".git"
        removed = []
        for lock in [git_dir / "index.lock", git_dir / "HEAD.lock", *git_dir.glob("refs/**/*.lock")]:
            if lock.is_file():
                lock.unlink(missing_ok=True)
                removed.append(lock.relative_to(self.root).as_posix())
        return removed

    def add_note(self, sha: str, note: dict[str, Any]) -> None:
        self.git("notes", "--ref", NOTES_REF, "add", "-f", "-F", "-", sha, input_text=json.dumps(note))

    def commit_workspace(self, message: str, note: dict[str, Any] | None = None) -> str:
        """Commit the workspace (and the run's .gitignore) as they are on disk.

        The caller holds the run's write lock, so a git lock file found here is stale.
        """
        self.clear_stale_locks()
        self.git("add", "-A", "--", "workspace", ".gitignore")
        self.git("commit", "-q", "--allow-empty", "-F", "-", input_text=message)
        sha = self.head()
        if note is not None:
            self.add_note(sha, note)
        return sha

    def commit_version(self, record: VersionRecord, best_before: float | None) -> str:
        record.sha = ""
        sha = self.commit_workspace(record.message(best_before), note=record.to_dict())
        record.sha = sha
        return sha

    def versions(self) -> list[VersionRecord]:
        """Committed versions, oldest first, read from the notes (trailers as a fallback)."""
        if not self.has_commits():
            return []
        out = self.git("log", "--reverse", f"--notes={NOTES_REF}", "--format=%H%x1f%B%x1f%N%x1e")
        records: list[VersionRecord] = []
        for entry in out.split("\x1e"):
            parts = entry.strip("\n").split("\x1f")
            if len(parts) < 3:
                continue
            sha, body, note = parts[0].strip(), parts[1], parts[2].strip()
            rec = _from_note(note)
            if rec is None:
                rec = _from_trailers(body)
                if rec is None:
                    continue
                rec.noted = False
            rec.sha = sha
            records.append(rec)
        return records

    def find_attempt(self, attempt: int) -> str | None:
        """The commit that recorded ``attempt``, if any (used to reconcile after a crash)."""
        for rec in self.versions():
            if rec.attempt == attempt:
                return rec.sha
        return None

    def show(self, rev: str, path: str) -> str:
        return self.git("show", f"{rev}:{path}")

    def diff(self, old: str, new: str) -> str:
        return self.git("diff", "--no-color", old, new, "--", "workspace")

    def root_commit(self) -> str:
        return self.git("rev-list", "--max-parents=0", "HEAD").split()[0]

    def workspace_dirty(self) -> bool:
        return bool(self.git("status", "--porcelain", "--", "workspace").strip())


def _from_note(note: str) -> VersionRecord | None:
    if not note:
        return None
    try:
        return VersionRecord.from_dict(json.loads(note))
    except (json.JSONDecodeError, TypeError):
        return None


def _from_trailers(body: str) -> VersionRecord | None:
    trailers: dict[str, str] = {}
    for line in body.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Nodice-"):
            trailers[key] = value.strip()
    if "Nodice-Version" not in trailers:
        return None
    # Without Nodice-Unit the commit predates throughput scores: its numbers are speedups.
    unit = trailers.get("Nodice-Unit")
    ratio = trailers.get("Nodice-Ratio-Best", "-")
    scores: list[dict[str, Any]] = []
    for item in trailers.get("Nodice-Scores", "").split():
        name, _, val = item.partition("=")
        score: dict[str, Any] = {"workload": name, "score": float(val or 0)}
        if unit is not None:
            score |= {"unit": unit, "throughput": score["score"]}
        scores.append(score)
    stages = dict(s.partition("=")[::2] for s in trailers.get("Nodice-Stages", "").split() if "=" in s)
    return VersionRecord(
        version=int(trailers["Nodice-Version"]),
        attempt=int(trailers.get("Nodice-Attempt", "-1")),
        geomean=float(trailers.get("Nodice-Geomean", "0")),
        verdict=trailers.get("Nodice-Verdict", ""),
        stages=stages,
        scores=scores,
        description=body.split("\n\n", 2)[1] if body.count("\n\n") >= 2 else "",
        agent=trailers.get("Nodice-Agent", ""),
        created=0.0,
        island=int(trailers["Nodice-Island"]) if trailers.get("Nodice-Island", "").isdigit() else None,
        unit=LEGACY_UNIT if unit is None else ("" if unit == "-" else unit),
        ratio_best=None if ratio in ("", "-") else float(ratio),
    )
