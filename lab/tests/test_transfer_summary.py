"""`lab/scripts/transfer.py`: the second phase starts from the first phase's best version, and the
summary reads both runs' lineages and stores (two real, CPU-sized evolution runs: the session's
built-in run as the first phase)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodice.evolution.lineage import Lineage
from tests.conftest import ROOT, run_cli
from tests.evolution_helpers import builtin_run

SCRIPT = ROOT / "lab" / "scripts" / "transfer.py"


def _evolve(run: Path, seed: Path, workload: str, budget: int) -> None:
    proc = run_cli(
        "evolve", "rmsnorm", "--device", "cpu", "--budget", str(budget), "--seed", str(seed),
        "--workload", workload, "--run-dir", str(run), "--no-report", "--rng-seed", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's nodice, whatever is installed
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=env
    )


def test_phase_b_starts_from_phase_as_best_and_the_summary_reads_both(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Phase A: the session's built-in rmsnorm run (read only); phase B: one evaluation on cpu-wide.
    a, _, _ = builtin_run(tmp_path_factory)
    a_workloads = json.loads((a / "run.json").read_text())["workloads"]
    b = tmp_path / "b"
    best = tmp_path / "a_best.py"
    assert _script("best", str(a), str(best)).returncode == 0
    versions = Lineage(a).versions()
    assert best.read_text() == Lineage(a).show(versions[-1].sha, "workspace/kernel.py")
    _evolve(b, best, "cpu-wide", 1)
    b_lineage = Lineage(b)
    assert b_lineage.show(b_lineage.root_commit(), "workspace/kernel.py") == best.read_text()

    out = tmp_path / "transfer.json"
    proc = _script("summary", str(a), str(b), str(out))
    assert proc.returncode == 0, proc.stderr
    s = json.loads(out.read_text())
    assert s["a"]["workloads"] == a_workloads and s["b"]["workloads"] == ["cpu-wide"]
    assert s["a"]["commits"] == len(versions) and s["a"]["best"]["version"] == versions[-1].version
    assert s["target_ratio"] == s["a"]["best"]["ratio_best"]
    assert s["b"]["evaluations"] == 1 and s["b"]["best"]["s_after_start"] == 0.0
    # B's only version is its seed: it reached A's ratio at once, or never.
    b_ratio = s["b"]["seed"]["ratio_best"]
    assert s["b_s_to_target"] == (0.0 if b_ratio >= s["target_ratio"] else None)
    assert s["b_s_to_within"] == (0.0 if b_ratio >= s["target_ratio"] * (1 - s["within"]) else None)


def test_the_gpu_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "lab" / "scripts" / "transfer.sh")], check=True)
