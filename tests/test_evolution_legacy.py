"""Run directories from before throughput scores: never resumed (units would be compared), still reported."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from nodice.evolution.journal import Attempt, Journal
from tests.conftest import EXAMPLES, run_cli

SEED = (EXAMPLES / "rmsnorm" / "seed.py").read_text()

# What an older nodice wrote: run.json without a unit, scores that are speedups over the reference,
# baselines as their time in ms.
OLD_CONFIG = {
    "task": "rmsnorm",
    "device": "cpu",
    "agent": "builtin",
    "model": None,
    "budget": 12,
    "time_budget_s": None,
    "knowledge_dirs": [],
    "base_url": None,
    "entry": "kernel",
    "run_id": "0123456789ab",
    "stagnation_window": 6,
    "rng_seed": 0,
}
OLD_SCORES = [
    {
        "workload": "cpu-small",
        "ms": 2.0,
        "score": 1.2,
        "reference_ms": 2.4,
        "baselines": {"torch F.rms_norm": 0.6},
    },
    {
        "workload": "cpu-wide",
        "ms": 4.0,
        "score": 1.5,
        "reference_ms": 6.0,
        "baselines": {"torch F.rms_norm": 1.5},
    },
]


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    identity = ["-c", "user.name=old", "-c", "user.email=old@localhost", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *identity, *args], cwd=root, input=stdin, capture_output=True, text=True, check=True
    ).stdout


def _old_attempt(files: dict[str, str], outcome: str, geomean: float, version: int | None) -> Attempt:
    return Attempt(
        id=0,
        created=time.time(),
        agent="seed" if version == 0 else "builtin",
        label="seed" if version == 0 else "param:num_warps=8",
        description="",
        files_sha=str(hash(files["kernel.py"])),
        files=files,
        bench=True,
        verdict="pass",
        reason="",
        geomean=geomean,
        scores=OLD_SCORES,
        stages={"static": "pass", "correctness": "pass", "dynamic": "pass"},
        feedback="score (geomean of per-workload speedup over the reference): 1.342",
        outcome=outcome,
        best_before=0.0 if version == 0 else 1.342,
        version=version,
    )


@pytest.fixture
def legacy_run(tmp_path: Path) -> Path:
    """A run directory as an older nodice left it: git lineage with old trailers and notes, its store."""
    root = tmp_path / "old-run"
    (root / "workspace").mkdir(parents=True)
    (root / ".gitignore").write_text("run.json\nstate.json\nresults.sqlite*\nscratch/\nreport.html\n*.png\n")
    (root / "workspace" / "kernel.py").write_text(SEED)
    _git(root, "init", "-q")
    _git(root, "symbolic-ref", "HEAD", "refs/heads/main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-F", "-", stdin="run: evolve rmsnorm from the rmsnorm example seed\n")
    journal = Journal(root / "results.sqlite")
    seed = _old_attempt({"kernel.py": SEED}, "committed", 1.342, 0)
    journal.add_attempt(seed)
    message = (
        "v0: geomean 1.342\n\nthe seed kernel\n\nNodice-Version: 0\nNodice-Attempt: 1\n"
        "Nodice-Geomean: 1.342\nNodice-Verdict: pass\nNodice-Stages: static=pass correctness=pass "
        "dynamic=pass\nNodice-Scores: cpu-small=1.2 cpu-wide=1.5\nNodice-Agent: seed\n"
    )
    _git(root, "commit", "-q", "--allow-empty", "-F", "-", stdin=message)
    sha = _git(root, "rev-parse", "HEAD").strip()
    note = {
        "version": 0,
        "attempt": seed.id,
        "geomean": 1.342,
        "verdict": "pass",
        "stages": seed.stages,
        "scores": OLD_SCORES,
        "description": "the seed kernel",
        "agent": "seed",
        "created": seed.created,
        "sha": "",
        "parent_version": None,
        "files": ["kernel.py"],
    }
    _git(root, "notes", "--ref", "nodice", "add", "-F", "-", sha, stdin=json.dumps(note))
    journal.mark_committed(seed.id, 0, sha)
    journal.add_attempt(_old_attempt({"kernel.py": SEED + "\n# slower\n"}, "slower", 1.1, None))
    journal.close()
    (root / "run.json").write_text(json.dumps(OLD_CONFIG, indent=2, sort_keys=True) + "\n")
    (root / "state.json").write_text(json.dumps({"status": "finished", "evaluations": 2}) + "\n")
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_evolve_refuses_a_legacy_run_in_one_line_and_touches_nothing(legacy_run: Path) -> None:
    before = _snapshot(legacy_run)
    result = run_cli("evolve", "rmsnorm", "--run-dir", str(legacy_run), "--device", "cpu", "--no-report")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"cannot resume: {legacy_run} was scored as speedup over the reference by an older nodice; "
        "scores in GB/s cannot be compared with it: start a new run "
        f"(--run-dir NEW --seed {legacy_run}/workspace/kernel.py)"
    ]
    assert _snapshot(legacy_run) == before


def test_external_agent_cannot_evaluate_into_a_legacy_run(legacy_run: Path) -> None:
    result = run_cli("run", "eval", "--run-dir", str(legacy_run))
    assert result.returncode == 2 and "older nodice" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    journal = Journal(legacy_run / "results.sqlite")
    try:
        assert journal.count() == 2  # nothing was evaluated
    finally:
        journal.close()


def test_report_on_a_legacy_run_renders_speedups(legacy_run: Path) -> None:
    result = run_cli("report", str(legacy_run))
    assert result.returncode == 0, result.stderr
    html = (legacy_run / "report.html").read_text()
    assert "v0 — geomean 1.342 <span" in html and "speedup over the task's reference" in html
    # The old ms-valued baseline, as a speedup: geomean of 2.4/0.6 and 6.0/1.5 = 4.
    assert "baseline: torch F.rms_norm</td><td colspan='2'>geomean 4</td>" in html
    assert "GB/s" not in html
    for png in ("trajectory.png", "workloads.png", "rejections.png"):
        assert (legacy_run / png).stat().st_size > 5000
