"""Throughput of full evaluations (sandbox + guards + gate + benchmark) and where the time goes.

    PYTHONPATH=. python3 bench/gpu/evaluation_rate.py [--task rmsnorm] [--n 30] [--repeat 5] [--isolated 2]

Evaluates ``--n`` distinct variants of the task's bundled seed in one
persistent worker (each variant carries a unique constant inside its Triton
kernel, so every one is compiled afresh, as an evolving candidate is), then
the same variant ``--repeat`` times (compilation cached), then ``--isolated``
variants with a fresh worker each. Writes ``eval_throughput.json`` to $OUT (or
the current folder) and prints a table. Target for rmsnorm on one GPU: at least
20 full evaluations (gate plus benchmark on 4 workloads) per minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from nodice.evaluation import Evaluation, Evaluator

EXAMPLES = Path(__file__).resolve().parents[2] / "nodice" / "examples"
TARGET_PER_MINUTE = 20.0
# Stage timings reported, in pipeline order; "compile" is the first call of the kernel
# (JIT compilation plus one run), carved out of the guards stage that makes it.
STAGES = (
    "worker_start",
    "import",
    "static_guards",
    "static",
    "load",
    "compile",
    "guards",
    "correctness",
    "dynamic",
    "bench",
)


def make_variants(task: str, n: int, folder: Path) -> list[Path]:
    """Copies of the seed whose jit kernels differ by one unused constant: n distinct compilations."""
    source = (EXAMPLES / task / "seed.py").read_text()
    # First statement of every @triton.jit function body gets a neighbour.
    pattern = re.compile(r"(@triton\.jit\s*\ndef [^\n]*:\n(?:\s*\"\"\"[\s\S]*?\"\"\"\n)?)([ \t]+)")
    if not pattern.search(source):
        raise SystemExit(f"cannot find a @triton.jit function in {task}/seed.py")
    paths = []
    for i in range(n):
        variant = pattern.sub(lambda m, i=i: f"{m.group(1)}{m.group(2)}_variant = {i}\n{m.group(2)}", source)
        p = folder / f"variant_{i:03d}.py"
        p.write_text(variant)
        paths.append(p)
    return paths


def breakdown(e: Evaluation) -> dict[str, float]:
    t = dict(e.timings)
    first = t.pop("first_call", 0.0)
    row = {k: float(t.get(k, 0.0)) for k in STAGES if k not in ("compile", "guards")}
    row["compile"] = first
    row["guards"] = max(0.0, t.get("guards", 0.0) - first)
    row["other"] = max(0.0, e.ms - sum(row.values()))
    row["total"] = e.ms
    return row


def run_phase(ev: Evaluator, paths: list[Path], task: str, label: str) -> dict[str, Any]:
    rows, verdicts = [], []
    t0 = time.perf_counter()
    for i, p in enumerate(paths):
        e = ev.evaluate(p, task, seed=i, run_id=label)
        verdicts.append(e.verdict)
        rows.append(breakdown(e))
        if e.verdict != "pass":
            print(f"  {label} {p.name}: {e.verdict} {e.check.reason[:120]}")
    wall = time.perf_counter() - t0
    steady = rows[1:] if len(rows) > 1 else rows
    steady_s = sum(r["total"] for r in steady) / 1e3
    return {
        "label": label,
        "evaluations": len(paths),
        "passed": verdicts.count("pass"),
        "wall_s": round(wall, 2),
        "per_minute": round(60 * len(paths) / wall, 2),
        "steady_per_minute": round(60 * len(steady) / steady_s, 2) if steady_s else None,
        "mean_ms": {k: round(statistics.mean(r[k] for r in rows), 1) for k in rows[0]},
        "steady_mean_ms": {k: round(statistics.mean(r[k] for r in steady), 1) for k in steady[0]},
        "last": e.to_dict() | {"source": ""},
    }


def print_table(phases: list[dict[str, Any]]) -> None:
    cols = [*STAGES, "other", "total"]
    print(
        f"{'phase':<12}{'evals':>6}{'/min':>8}{'steady/min':>12}  " + "".join(f"{c[:11]:>12}" for c in cols)
    )
    for ph in phases:
        means = ph["steady_mean_ms"]
        steady = ph["steady_per_minute"] or 0.0
        print(
            f"{ph['label']:<12}{ph['evaluations']:>6}{ph['per_minute']:>8.1f}{steady:>12.1f}  "
            + "".join(f"{means.get(c, 0.0):>12.1f}" for c in cols)
        )
    print("(stage columns: mean milliseconds per evaluation, first evaluation of each phase excluded)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="rmsnorm")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--n", type=int, default=30, help="distinct variants in the persistent worker")
    ap.add_argument("--repeat", type=int, default=5, help="evaluations of one variant (compile cached)")
    ap.add_argument("--isolated", type=int, default=2, help="evaluations with a fresh worker each")
    args = ap.parse_args()

    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    phases = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        variants = make_variants(args.task, args.n + args.isolated, folder)
        store = folder / "evals.sqlite"
        with Evaluator(device=args.device, isolation="persistent", store=store) as ev:
            phases.append(run_phase(ev, variants[: args.n], args.task, "persistent"))
            if args.repeat:
                phases.append(run_phase(ev, [variants[0]] * args.repeat, args.task, "cached"))
            assert ev.store is not None
            stored = ev.store.count()
        if args.isolated:
            with Evaluator(device=args.device, isolation="isolated") as ev:
                phases.append(run_phase(ev, variants[args.n :], args.task, "isolated"))
    persistent = phases[0]
    result = {
        "task": args.task,
        "device": args.device,
        "target_per_minute": TARGET_PER_MINUTE,
        "meets_target": (persistent["steady_per_minute"] or 0) >= TARGET_PER_MINUTE,
        "stored_evaluations": stored,
        "phases": phases,
        "environment": persistent["last"]["environment"],
        "workloads": [
            {
                k: s[k]
                for k in ("workload", "ms", "reference_ms", "baselines", "gbps", "tflops", "reps", "score")
            }
            for s in persistent["last"]["scores"]
        ],
    }
    path = out_dir / "eval_throughput.json"
    path.write_text(json.dumps(result, indent=2))
    print_table(phases)
    for w in result["workloads"]:
        print(
            f"  {w['workload']:<24} {w['ms']:.4f} ms  ref {w['reference_ms']:.4f} ms  "
            f"{w['gbps'] or 0:.0f} GB/s  score {w['score']:.2f}  reps {w['reps']}  baselines {w['baselines']}"
        )
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(
        f"{args.task}: {persistent['steady_per_minute']} evaluations/min steady ({verdict} the target of "
        f"{TARGET_PER_MINUTE}); {persistent['per_minute']} including worker start. JSON: {path}"
    )


if __name__ == "__main__":
    main()
