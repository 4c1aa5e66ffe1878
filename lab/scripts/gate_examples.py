"""Run `nodice check` on every bundled example on CUDA and record verdicts and stage timings.

    PYTHONPATH=. python3 lab/scripts/gate_examples.py [--task T ...] [--seeds 0 1]

Writes gpu_check_examples.json to $OUT (or the current folder) and prints a table.
Each example runs twice per seed: the first run includes Triton compilation,
the second shows the steady-state stage times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
import triton

from nodice.gate.pipeline import check

EXAMPLES = Path(__file__).resolve().parents[2] / "nodice" / "examples"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", action="append")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--static", action="store_true", help="include the static stage")
    ap.add_argument("--runs", type=int, default=2, help="runs per seed (the last one is reported)")
    args = ap.parse_args()
    rows: list[dict] = []
    env = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    out = Path(os.environ.get("OUT", ".")) / (
        "gpu_check_examples" + ("_full" if args.static else "") + ".json"
    )
    for folder in sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("_")):
        if args.task and folder.name not in args.task:
            continue
        for f in sorted(folder.glob("*.py")):
            if f.name.startswith("_"):
                continue
            expected = "pass" if f.stem == "seed" else "bi_violation"
            for seed in args.seeds:
                runs = []
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    r = check(f, folder.name, device="cuda", seed=seed, static=args.static)
                    runs.append((r, (time.perf_counter() - t0) * 1e3))
                r, wall = runs[-1]
                row = {
                    "task": folder.name,
                    "candidate": f.name,
                    "seed": seed,
                    "expected": expected,
                    "verdict": r.verdict,
                    "reason": r.reason,
                    "first_wall_ms": round(runs[0][1], 1),
                    "wall_ms": round(wall, 1),
                    "stages": {s.name: {"verdict": s.verdict, "ms": s.ms, **s.stats} for s in r.stages},
                    "mismatch": r.to_dict()["mismatch"],
                    "dtype": r.dtype,
                }
                rows.append(row)
                # Written after every row: a run cut short by its time limit keeps what it measured.
                out.write_text(json.dumps({"environment": env, "results": rows}, indent=1))
                ok = "ok" if (r.verdict == "pass") == (expected == "pass") else "DIFF"
                print(
                    f"{ok:4} {folder.name:18} {f.name:34} seed={seed} {r.verdict:13} "
                    f"first={runs[0][1]:8.0f}ms steady={wall:8.0f}ms {r.reason[:80]}",
                    flush=True,
                )
    agree = sum((r["verdict"] == "pass") == (r["expected"] == "pass") for r in rows)
    print(
        f"\n{agree}/{len(rows)} verdicts as expected on {env['gpu']} "
        f"(torch {env['torch']}, triton {env['triton']})"
    )


if __name__ == "__main__":
    main()
