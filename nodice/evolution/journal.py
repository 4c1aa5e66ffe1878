"""The evolution journal: every evaluation attempt and every supervisor intervention, in SQLite.

It lives in the run's result store (its own tables beside the evaluation
service's). A row is written once the evaluation it records has finished, in
one transaction, so a run killed at any moment holds only complete rows.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nodice.errors import StoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS evolution_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    agent TEXT NOT NULL,
    label TEXT NOT NULL,
    description TEXT NOT NULL,
    files_sha TEXT NOT NULL,
    files TEXT NOT NULL,
    bench INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL,
    geomean REAL NOT NULL,
    scores TEXT NOT NULL,
    stages TEXT NOT NULL,
    feedback TEXT NOT NULL,
    outcome TEXT NOT NULL,
    best_before REAL NOT NULL,
    version INTEGER,
    sha TEXT,
    direction TEXT NOT NULL DEFAULT '',
    elapsed_s REAL NOT NULL DEFAULT 0,
    island INTEGER
);
CREATE TABLE IF NOT EXISTS evolution_interventions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    after_attempt INTEGER NOT NULL,
    trigger TEXT NOT NULL,
    review TEXT NOT NULL,
    directions TEXT NOT NULL,
    chosen TEXT NOT NULL,
    source TEXT NOT NULL
);
"""

# Outcomes of an attempt. "eligible" passed with a geomean at least the best: commit may take it;
# "bits_differ" passed the gate but changed the bits of the version it was to speed up (a knob
# setting), so it was not timed.
OUTCOMES = (
    "eligible",
    "committed",
    "slower",
    "gate_only",
    "bi_violation",
    "incorrect",
    "cheat",
    "error",
    "bits_differ",
)


@dataclass
class Attempt:
    """One finished evaluation of a workspace snapshot."""

    id: int
    created: float
    agent: str
    label: str
    description: str
    files_sha: str
    files: dict[str, str]
    bench: bool
    verdict: str
    reason: str
    geomean: float
    scores: list[dict[str, Any]]
    stages: dict[str, str]
    feedback: str
    outcome: str
    best_before: float
    version: int | None = None
    sha: str | None = None
    direction: str = ""
    elapsed_s: float = 0.0
    # Which island proposed it when several agents share the lineage (None: the run's one agent).
    island: int | None = None
    # The gate's result as `nodice check --json` writes it (findings, first mismatch), for tools that
    # hand diagnostics on as data; only on an attempt just judged: the journal keeps them as feedback.
    check: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def rejection(self) -> str | None:
        """Why it was not committed, as a category (None for committed or still eligible)."""
        return None if self.outcome in ("committed", "eligible") else self.outcome

    def to_dict(self, with_files: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d.pop("check")
        if not with_files:
            d.pop("files")
        return d


@dataclass
class Intervention:
    """One supervisor intervention: what triggered it, its review, the directions it proposed."""

    id: int
    created: float
    after_attempt: int
    trigger: str
    review: str
    directions: list[str] = field(default_factory=list)
    chosen: str = ""
    source: str = "rules"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Journal:
    """Reads and writes the evolution tables of the run's SQLite store."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(evolution_attempts)")}
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot read the run's journal {path}: {exc}") from None
        if "island" not in columns:  # a store written before islands
            # Another process may have added it a moment ago.
            with contextlib.suppress(sqlite3.OperationalError):
                self._db.execute("ALTER TABLE evolution_attempts ADD COLUMN island INTEGER")

    def close(self) -> None:
        self._db.close()

    # ---- attempts ----------------------------------------------------------
    def add_attempt(self, a: Attempt) -> int:
        cur = self._db.execute(
            "INSERT INTO evolution_attempts (created, agent, label, description, files_sha, files, bench,"
            " verdict, reason, geomean, scores, stages, feedback, outcome, best_before, version, sha,"
            " direction, elapsed_s, island) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                a.created or time.time(),
                a.agent,
                a.label,
                a.description,
                a.files_sha,
                json.dumps(a.files),
                int(a.bench),
                a.verdict,
                a.reason,
                a.geomean,
                json.dumps(a.scores),
                json.dumps(a.stages),
                a.feedback,
                a.outcome,
                a.best_before,
                a.version,
                a.sha,
                a.direction,
                a.elapsed_s,
                a.island,
            ),
        )
        a.id = int(cur.lastrowid or 0)
        return a.id

    def mark_committed(self, attempt_id: int, version: int, sha: str) -> None:
        self._db.execute(
            "UPDATE evolution_attempts SET outcome='committed', version=?, sha=? WHERE id=?",
            (version, sha, attempt_id),
        )

    def set_outcome(self, attempt_id: int, outcome: str) -> None:
        self._db.execute("UPDATE evolution_attempts SET outcome=? WHERE id=?", (outcome, attempt_id))

    def attempts(self, since: int = 0) -> list[Attempt]:
        rows = self._db.execute(
            "SELECT id, created, agent, label, description, files_sha, files, bench, verdict, reason,"
            " geomean, scores, stages, feedback, outcome, best_before, version, sha, direction, elapsed_s,"
            " island FROM evolution_attempts WHERE id > ? ORDER BY id",
            (since,),
        ).fetchall()
        return [_attempt(r) for r in rows]

    def attempt(self, attempt_id: int) -> Attempt | None:
        found = [a for a in self.attempts(since=attempt_id - 1) if a.id == attempt_id]
        return found[0] if found else None

    def latest_for(self, files_sha: str) -> Attempt | None:
        row = self._db.execute(
            "SELECT id FROM evolution_attempts WHERE files_sha=? ORDER BY id DESC LIMIT 1", (files_sha,)
        ).fetchone()
        return self.attempt(int(row[0])) if row else None

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM evolution_attempts").fetchone()[0])

    def count_by_island(self) -> dict[int, int]:
        rows = self._db.execute(
            "SELECT island, COUNT(*) FROM evolution_attempts WHERE island IS NOT NULL GROUP BY island"
        )
        return {int(k): int(n) for k, n in rows}

    def rejections_by_reason(self) -> dict[str, int]:
        return dict(Counter(a.rejection for a in self.attempts() if a.rejection))

    # ---- interventions ---------------------------------------------------------
    def add_intervention(self, iv: Intervention) -> int:
        cur = self._db.execute(
            "INSERT INTO evolution_interventions (created, after_attempt, trigger, review, directions,"
            " chosen, source) VALUES (?,?,?,?,?,?,?)",
            (
                iv.created or time.time(),
                iv.after_attempt,
                iv.trigger,
                iv.review,
                json.dumps(iv.directions),
                iv.chosen,
                iv.source,
            ),
        )
        iv.id = int(cur.lastrowid or 0)
        return iv.id

    def interventions(self) -> list[Intervention]:
        rows = self._db.execute(
            "SELECT id, created, after_attempt, trigger, review, directions, chosen, source"
            " FROM evolution_interventions ORDER BY id"
        ).fetchall()
        return [Intervention(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows]


def _attempt(r: tuple[Any, ...]) -> Attempt:
    return Attempt(
        id=r[0],
        created=r[1],
        agent=r[2],
        label=r[3],
        description=r[4],
        files_sha=r[5],
        files=json.loads(r[6]),
        bench=bool(r[7]),
        verdict=r[8],
        reason=r[9],
        geomean=r[10],
        scores=json.loads(r[11]),
        stages=json.loads(r[12]),
        feedback=r[13],
        outcome=r[14],
        best_before=r[15],
        version=r[16],
        sha=r[17],
        direction=r[18],
        elapsed_s=r[19],
        island=r[20],
    )
