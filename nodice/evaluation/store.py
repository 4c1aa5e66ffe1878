"""The result store: every evaluation in SQLite, one transaction each.

WAL journaling with ``synchronous=NORMAL``: a committed evaluation survives the
evaluating process being killed at any point, and readers (a report, a
dashboard) never block the writer. Sources are stored once per sha256.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nodice.errors import StoreError
from nodice.evaluation.record import Evaluation

# 2: scores carry throughput, unit, ratio to the best baseline and fraction of the device ceiling.
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    sha256 TEXT PRIMARY KEY,
    source TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    run_id TEXT,
    task TEXT NOT NULL,
    candidate TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    verdict TEXT NOT NULL,
    cheat_rule TEXT,
    reason TEXT,
    device TEXT,
    isolation TEXT,
    seed INTEGER,
    ms REAL,
    geomean REAL,
    check_json TEXT NOT NULL,
    timings_json TEXT NOT NULL,
    environment_json TEXT NOT NULL,
    log TEXT
);
CREATE TABLE IF NOT EXISTS scores (
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
    workload TEXT NOT NULL,
    ms REAL,
    tflops REAL,
    gbps REAL,
    speedup_vs_reference REAL,
    score REAL,
    correct INTEGER,
    score_json TEXT NOT NULL,
    throughput REAL,
    unit TEXT,
    ratio_best REAL,
    limit_fraction REAL
);
CREATE INDEX IF NOT EXISTS evaluations_by_run ON evaluations(run_id, id);
CREATE INDEX IF NOT EXISTS evaluations_by_task ON evaluations(task, verdict);
CREATE INDEX IF NOT EXISTS evaluations_by_sha ON evaluations(sha256);
CREATE INDEX IF NOT EXISTS scores_by_evaluation ON scores(evaluation_id);
"""


_SCORE_COLUMNS_V2 = (
    ("throughput", "REAL"),
    ("unit", "TEXT"),
    ("ratio_best", "REAL"),
    ("limit_fraction", "REAL"),
)


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Shared by the threads of a multi-worker evaluator, which take turns (the Evaluator locks).
            self.conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            with self.conn:
                self.conn.executescript(_SCHEMA)
                self._migrate()
                self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot use {self.path} as a result store: {exc}") from None

    def _migrate(self) -> None:
        """Add the columns a store made by an older nodice lacks (its rows keep NULL there)."""
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(scores)")}
        for column, kind in _SCORE_COLUMNS_V2:
            if column not in have:
                self.conn.execute(f"ALTER TABLE scores ADD COLUMN {column} {kind}")

    def save(self, e: Evaluation) -> int:
        """Record one evaluation (and its scores) atomically; returns its id."""
        with self.conn:
            if e.sha256:
                self.conn.execute(
                    "INSERT OR IGNORE INTO sources(sha256, source) VALUES (?, ?)", (e.sha256, e.source)
                )
            cur = self.conn.execute(
                "INSERT INTO evaluations(created_at, run_id, task, candidate, sha256, verdict,"
                " cheat_rule, reason, device, isolation, seed, ms, geomean, check_json, timings_json,"
                " environment_json, log)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    e.timestamp,
                    e.run_id,
                    e.task,
                    e.candidate,
                    e.sha256,
                    e.verdict,
                    e.cheat_rule,
                    e.check.reason,
                    e.device,
                    e.isolation,
                    e.seed,
                    e.ms,
                    e.geomean,
                    json.dumps(e.check.to_dict()),
                    json.dumps(e.timings),
                    json.dumps(e.environment),
                    e.log,
                ),
            )
            eid = int(cur.lastrowid or 0)
            self.conn.executemany(
                "INSERT INTO scores(evaluation_id, workload, ms, tflops, gbps, speedup_vs_reference, score,"
                " correct, score_json, throughput, unit, ratio_best, limit_fraction)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        eid,
                        s.workload,
                        s.ms,
                        s.tflops,
                        s.gbps,
                        s.speedup_vs_reference,
                        s.score,
                        int(s.correct),
                        json.dumps(s.to_dict()),
                        s.throughput,
                        s.unit,
                        s.ratio_best,
                        s.limit_fraction,
                    )
                    for s in e.scores
                ],
            )
        return eid

    def count(self, run_id: str | None = None) -> int:
        if run_id is None:
            row = self.conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()
        else:
            row = self.conn.execute("SELECT COUNT(*) FROM evaluations WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0])

    def _evaluation(self, row: sqlite3.Row | tuple[Any, ...]) -> Evaluation:
        (eid, ts, run_id, task, cand, sha, seed, ms, device, isolation, check, timings, env, log) = row
        source = self.conn.execute("SELECT source FROM sources WHERE sha256 = ?", (sha,)).fetchone()
        scores = [
            json.loads(r[0])
            for r in self.conn.execute(
                "SELECT score_json FROM scores WHERE evaluation_id = ? ORDER BY rowid", (eid,)
            )
        ]
        return Evaluation.from_dict(
            {
                "check": json.loads(check),
                "scores": scores,
                "ms": ms,
                "task": task,
                "candidate": cand,
                "sha256": sha,
                "source": source[0] if source else "",
                "seed": seed,
                "run_id": run_id,
                "device": device,
                "isolation": isolation,
                "timings": json.loads(timings),
                "environment": json.loads(env),
                "timestamp": ts,
                "log": log or "",
            }
        )

    _COLUMNS = (
        "id, created_at, run_id, task, candidate, sha256, seed, ms, device, isolation,"
        " check_json, timings_json, environment_json, log"
    )

    def get(self, evaluation_id: int) -> Evaluation | None:
        row = self.conn.execute(
            f"SELECT {self._COLUMNS} FROM evaluations WHERE id = ?", (evaluation_id,)
        ).fetchone()
        return self._evaluation(row) if row else None

    def evaluations(
        self, run_id: str | None = None, task: str | None = None, verdict: str | None = None
    ) -> Iterator[Evaluation]:
        """Stored evaluations in the order they were made, optionally filtered."""
        where, params = [], []
        for column, value in (("run_id", run_id), ("task", task), ("verdict", verdict)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT {self._COLUMNS} FROM evaluations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        for row in self.conn.execute(sql + " ORDER BY id", params).fetchall():
            yield self._evaluation(row)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
