"""Evaluations per minute of `nodice evolve` with 1 and with N workers on one Ray cluster, in one run.

    PYTHONPATH=. python3 bench/executor_throughput.py --ray-address HOST:PORT [--task rmsnorm]
        [--device cpu] [--budget 12] [--workers 1 --workers 2] [--kill-after 4] [--json FILE]

For each worker count, a fresh run directory and the command
``nodice evolve TASK --device D --executor ray --ray-address A --workers W --budget B``;
the rate is the evaluations after the seed over the time from the seed's end to the last
evaluation's end (the journal's clocks), and also all evaluations over the command's wall time.
With ``--kill-after K`` one more run with the largest worker count is killed (SIGKILL) once K
evaluations are recorded, resumed with the same command, and its lineage checked: every commit
a version in git, no source judged twice, each version at least as fast as the one before.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.measuring.provenance import environment


def _command(args: argparse.Namespace, run_dir: Path, workers: int) -> list[str]:
    return [
        *(sys.executable, "-m", "nodice", "evolve", args.task, "--run-dir", str(run_dir)),
        *("--device", args.device, "--executor", "ray", "--ray-address", args.ray_address),
        *("--workers", str(workers), "--budget", str(args.budget), "--no-report"),
    ]


def _shown(cmd: list[str]) -> str:
    return "nodice " + " ".join(cmd[3:5] + [c for c in cmd[7:]])


def _recorded(store: Path) -> int:
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM evolution_attempts").fetchone()[0])
    except sqlite3.Error:
        return 0


def lineage_check(run_dir: Path) -> dict[str, Any]:
    attempts = Journal(run_dir / "results.sqlite").attempts()
    versions = Lineage(run_dir).versions()
    return {
        "evaluations": len(attempts),
        "versions": len(versions),
        "commits_are_versions": {a.id for a in attempts if a.outcome == "committed"}
        == {v.attempt for v in versions},
        "no_source_twice": len({a.files_sha for a in attempts}) == len(attempts),
        "monotone": all(b.geomean >= a.geomean for a, b in itertools.pairwise(versions)),
        "best_geomean": versions[-1].geomean if versions else 0.0,
    }


def measure(args: argparse.Namespace, workers: int, root: Path) -> dict[str, Any]:
    run_dir = root / f"w{workers}"
    cmd = _command(args, run_dir, workers)
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{_shown(cmd)} failed: {done.stderr.strip()[-400:]}")
    attempts = Journal(run_dir / "results.sqlite").attempts()
    seed_end = attempts[0].created
    after_seed = attempts[1:]
    span = max(a.created for a in after_seed) - seed_end if after_seed else 0.0
    return {
        "workers": workers,
        "command": _shown(cmd),
        "evaluations": len(attempts),
        "wall_s": round(wall, 1),
        "evaluations_per_minute_wall": round(len(attempts) / wall * 60, 2),
        "after_seed_s": round(span, 1),
        "evaluations_per_minute_after_seed": round(len(after_seed) / span * 60, 2) if span else None,
        "mean_evaluation_s": round(sum(a.elapsed_s for a in attempts) / len(attempts), 2),
        "lineage": lineage_check(run_dir),
    }


def kill_and_resume(args: argparse.Namespace, workers: int, root: Path) -> dict[str, Any]:
    run_dir = root / f"killed-w{workers}"
    cmd = _command(args, run_dir, workers)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    store = run_dir / "results.sqlite"
    while proc.poll() is None and _recorded(store) < args.kill_after:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _recorded(store)
    again = subprocess.run(cmd, capture_output=True, text=True)
    return {
        "command": _shown(cmd),
        "killed_after_evaluations": before,
        "resume_exit_code": again.returncode,
        "resumed": "resuming the run" in again.stdout,
        "lineage": lineage_check(run_dir),
    }


def _speedup(runs: list[dict[str, Any]]) -> float | None:
    """Rate after the seed with the most workers over the rate with the fewest."""
    first, last = runs[0]["evaluations_per_minute_after_seed"], runs[-1]["evaluations_per_minute_after_seed"]
    return round(last / first, 2) if first and last else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray-address", required=True)
    parser.add_argument("--task", default="rmsnorm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--workers", type=int, action="append")
    parser.add_argument("--kill-after", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    counts = args.workers or [1, 2]
    machine, versions = environment(args.device)
    import ray

    versions["ray"] = ray.__version__
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="nodice-throughput-") as tmp:
        runs = [measure(args, w, Path(tmp)) for w in counts]
        killed = kill_and_resume(args, max(counts), Path(tmp)) if args.kill_after else None
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "load_average_at_start": round(load, 2),
        "versions": versions,
        "task": args.task,
        "device": args.device,
        "budget": args.budget,
        "runs": runs,
        "speedup_after_seed": _speedup(runs),
        "kill_and_resume": killed,
    }
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
