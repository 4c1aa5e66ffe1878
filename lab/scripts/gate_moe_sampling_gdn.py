"""GPU run of the moe, sampling, gdn and kda tasks: the gate on every bundled example, the seeds benchmarked.

    PYTHONPATH=. python3 lab/scripts/gate_moe_sampling_gdn.py [--task moe ...] [--seeds 0] [--no-bench]

For each task and seed: ``seed.py`` through the whole gate (it must pass); every
violating variant through the whole gate (it must be rejected) and through the
dynamic stage alone (the batches themselves must expose it on this GPU). Then
``seed.py`` through the Evaluator (gate, guards, benchmark on every workload,
in a sandboxed worker). Writes ``gpu_moe_sampling_gdn.json`` to $OUT (or the
current folder) and prints one line per verdict.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch
import triton

from nodice.evaluation.evaluate import Evaluator
from nodice.gate.pipeline import check
from nodice.gate.result import CheckResult

TASKS = ("moe", "sampling", "gdn", "kda")
EXAMPLES = Path(__file__).resolve().parents[2] / "nodice" / "examples"


def _row(task: str, f: Path, seed: int, mode: str, r: CheckResult, wall_ms: float) -> dict[str, Any]:
    expected = "pass" if f.stem == "seed" else "bi_violation"
    return {
        "task": task,
        "candidate": f.name,
        "seed": seed,
        "mode": mode,
        "expected": expected,
        "verdict": r.verdict,
        "as_expected": r.verdict == expected,
        "reason": r.reason,
        "wall_ms": round(wall_ms, 1),
        "stages": {s.name: {"verdict": s.verdict, "ms": s.ms, **s.stats} for s in r.stages},
        "mismatch": r.to_dict()["mismatch"],
        "dtype": r.dtype,
    }


def gate(tasks: list[str], seeds: list[int]) -> list[dict[str, Any]]:
    rows = []
    for task in tasks:
        for f in sorted((EXAMPLES / task).glob("*.py")):
            modes = [("full", True)] if f.stem == "seed" else [("full", True), ("dynamic-only", False)]
            for seed in seeds:
                for mode, static in modes:
                    t0 = time.perf_counter()
                    r = check(f, task, device="cuda", seed=seed, static=static, correctness=static)
                    row = _row(task, f, seed, mode, r, (time.perf_counter() - t0) * 1e3)
                    rows.append(row)
                    ok = "ok" if row["as_expected"] else "DIFF"
                    print(
                        f"{ok:4} {task:9} {f.name:30} seed={seed} {mode:12} {r.verdict:13} "
                        f"{row['wall_ms']:9.0f}ms {r.reason[:90]}",
                        flush=True,
                    )
    return rows


def bench(tasks: list[str], seed: int) -> list[dict[str, Any]]:
    out = []
    with Evaluator(device="cuda", isolation="isolated", timeout_s=900) as ev:
        for task in tasks:
            e = ev.evaluate(EXAMPLES / task / "seed.py", task, seed=seed)
            scores = [dataclasses.asdict(s) for s in e.scores]
            out.append({"task": task, "verdict": e.verdict, "reason": e.check.reason, "scores": scores})
            print(f"bench {task:9} {e.verdict:13} geomean speedup vs reference {e.geomean:.3f}", flush=True)
            for s in e.scores:
                print(
                    f"      {s.workload:34} {'ok ' if s.correct else 'BAD'} {s.ms or 0:10.4f} ms  "
                    f"TFLOP/s {s.tflops or 0:8.2f}  GB/s {s.gbps or 0:8.1f}  "
                    f"x ref {s.speedup_vs_reference or 0:8.2f} {s.detail[:60]}",
                    flush=True,
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", action="append", choices=TASKS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--no-bench", action="store_true")
    args = ap.parse_args()
    tasks = args.task or list(TASKS)
    rows = gate(tasks, args.seeds)
    scores = [] if args.no_bench else bench(tasks, args.seeds[0])
    env = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    out = Path(os.environ.get("OUT", "."))
    report = {"environment": env, "gate": rows, "bench": scores}
    (out / "gpu_moe_sampling_gdn.json").write_text(json.dumps(report, indent=1, default=str))
    agree = sum(r["as_expected"] for r in rows)
    print(f"\n{agree}/{len(rows)} gate verdicts as expected on {env['gpu']} (triton {env['triton']})")


if __name__ == "__main__":
    main()
