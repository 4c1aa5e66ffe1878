"""`nodice evolve --workload`: a run scored on some of the task's workloads (the MHA → GQA transfer
needs one run per layout), fixed for the life of the run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import run_cli


def test_a_run_scores_the_chosen_workloads_only_and_keeps_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "1", "--workload", "cpu-sm*",
        "--run-dir", str(run), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scored on 1 workloads: cpu-small" in proc.stdout
    assert json.loads((run / "run.json").read_text())["workloads"] == ["cpu-small"]
    with sqlite3.connect(run / "results.sqlite") as db:
        scored = {w for (w,) in db.execute("SELECT DISTINCT workload FROM scores")}
    assert scored == {"cpu-small"}

    # Resuming on other workloads would mix incomparable scores: one line, exit 2, nothing run.
    again = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "2", "--workload", "cpu-wide",
        "--run-dir", str(run), "--no-report",
    )  # fmt: skip
    assert again.returncode == 2 and "its workloads cannot change" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_a_pattern_that_matches_nothing_is_refused_before_a_run_exists(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", "1", "--workload", "gqa*",
        "--run-dir", str(run), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 2
    assert "no rmsnorm workload on cpu matches 'gqa*' (its workloads: cpu-small, cpu-wide)" in proc.stderr
    assert not run.exists()
