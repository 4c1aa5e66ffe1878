"""`nodice evolve` killed by SIGKILL mid-run resumes on rerun, loses nothing, and goes on to its budget."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from tests.conftest import ROOT

BUDGET = 2


def _evolve(run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nodice",
        "evolve",
        "rmsnorm",
        "--run-dir",
        str(run_dir),
        "--device",
        "cpu",
        "--budget",
        str(BUDGET),
        "--no-report",
    ]


def _attempts(store: Path) -> list[tuple[int, str, str]]:
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return db.execute("SELECT id, outcome, files_sha FROM evolution_attempts ORDER BY id").fetchall()
    except sqlite3.OperationalError:  # the table is not there yet
        return []


def test_kill_9_mid_run_then_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    store = run_dir / "results.sqlite"
    proc = subprocess.Popen(
        _evolve(run_dir), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 150
    try:
        while not _attempts(store) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        # The seed is recorded (and being committed, or committed); the next evaluation starts. Kill all.
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
    before = _attempts(store)
    assert len(before) == 1, "the run recorded no evaluation before the kill"
    # The kill may land before or after the seed's git commit: either way nothing may be lost.
    versions_before = [(v.version, v.sha) for v in Lineage(run_dir).versions()]

    again = subprocess.run(_evolve(run_dir), cwd=ROOT, capture_output=True, text=True, timeout=200)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming the run" in again.stdout

    after = _attempts(store)
    # Nothing recorded before the kill was lost; a commit the kill interrupted was completed.
    finished = {"committing": "committed"}
    assert after[: len(before)] == [(i, finished.get(o, o), sha) for i, o, sha in before]
    assert len(after) == BUDGET  # and it went on to spend the rest of the budget
    versions = Lineage(run_dir).versions()
    assert [(v.version, v.sha) for v in versions][: len(versions_before)] == versions_before
    assert versions[0].version == 0 and versions[0].attempt == before[0][0]  # the seed is v0
    journal = Journal(store)
    committed = {a.id for a in journal.attempts() if a.outcome == "committed"}
    assert committed == {v.attempt for v in versions}
    assert not any(a.outcome in ("committing", "eligible") for a in journal.attempts())
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "finished" and state["evaluations"] == BUDGET
    assert not (run_dir / "scratch").exists() or not any((run_dir / "scratch").iterdir())

    # A third run has nothing left to spend: it says so and changes nothing.
    third = subprocess.run(_evolve(run_dir), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and "budget spent" in third.stdout
    assert _attempts(store) == after
