"""A short built-in evolution run on CUDA: does the score improve on the GPU workloads, and what is rejected?

    PYTHONPATH=. python3 lab/scripts/evolve_short.py [--task rmsnorm] [--budget 16]

Writes gpu_evolve.json (summary, every attempt with its outcome, reason and
per-workload scores, the supervisor's interventions) to $OUT (or the current
folder), and the run's report.html and plots beside it when matplotlib is
installed. Needs nodice's dependencies (rank-bm25 for the knowledge base).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
import triton

from nodice.evolution.agents.builtin import BuiltinAgent
from nodice.evolution.engine import Engine
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="rmsnorm")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--rng-seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="nodice-gpu-evolve-")) / "run"
    t0 = time.perf_counter()
    run, config, _ = prepare_run(
        EvolveOptions(task=args.task, run_dir=root, device="cuda", budget=args.budget, rng_seed=args.rng_seed)
    )
    summary = Engine(run, config, BuiltinAgent(rng_seed=args.rng_seed)).execute()
    journal = Journal(run.store_path)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "task": args.task,
        "budget": args.budget,
        "wall_s": round(time.perf_counter() - t0, 1),
        "evaluations": summary.evaluations,
        "commits": summary.commits,
        "first_geomean": summary.first_geomean,
        "best_geomean": summary.best_geomean,
        "stop_reason": summary.stop_reason,
        "attempts": [a.to_dict() for a in journal.attempts()],
        "interventions": [iv.to_dict() for iv in journal.interventions()],
        "versions": [v.to_dict() for v in Lineage(run.root).versions()],
    }
    journal.close()
    try:
        from nodice.report import write_report

        page = write_report(run.root)
        for f in [page, *run.root.glob("*.png")]:
            shutil.copy(f, out / f.name)
    except ImportError as exc:
        result["report"] = f"not written: {exc}"
    (out / "gpu_evolve.json").write_text(json.dumps(result, indent=2))
    gain = summary.best_geomean / summary.first_geomean if summary.first_geomean else 0.0
    print(
        f"{args.task}: {summary.evaluations} evaluations, {summary.commits} versions, "
        f"geomean {summary.first_geomean:.4g} -> {summary.best_geomean:.4g} ({gain:.2f}x)"
    )


if __name__ == "__main__":
    main()
