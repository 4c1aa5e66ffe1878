"""Time of the gate's dynamic stage for a passing candidate, per task, compilation excluded.

    PYTHONPATH=. python3 bench/gpu/dynamic_speed.py [--device cuda|cpu] [--task rmsnorm ...] [--n 5]
        [--candidate FILE] [--no-guards] [--json FILE (default $OUT/dynamic_speed.json)]

For each task: load its bundled seed (or ``--candidate``), wrap it in the
evaluation's anti-cheat guards (as an evaluation's worker runs it; off with
``--no-guards``, as ``nodice check`` runs it), call the dynamic stage once to
compile, then time it ``--n`` more times on the same seed and report the
median. The stage is what ``nodice.gate.pipeline.check`` times as ``dynamic``:
validation in the task's dtype, then again in each probe dtype the kernel
accepts (fp32 on GPU, fp16 on CPU). Each run is also split into the phases
``validate`` reports (inputs, kernel calls, output selection, comparison),
with the guards' per-call harness check carved out of the kernel calls.
Issue target on one GPU: rmsnorm's seed under 300 ms. The script runs against
an older gate too (``git worktree add OLD REV``, copy the script in, run it there
with ``PYTHONPATH=OLD``): its phases are then left out, its total is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from nodice.errors import NodiceError
from nodice.gate.dynamic import validate
from nodice.gate.runtime import prepare, resolve_device
from nodice.loader import load_kernel
from nodice.tasks import get_task

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "nodice" / "examples"
TARGET_MS = 300.0


def dynamic_stage(task: Any, fn: Any, path: Path, device: torch.device, seed: int) -> dict[str, Any]:
    """One dynamic stage as the pipeline runs it: the task's dtype, then the probe dtypes."""
    dtype = task.dtype_for(device)
    totals: dict[str, float] = defaultdict(float)
    phases: dict[str, float] = defaultdict(float)
    t0 = time.perf_counter()
    for dt in [dtype, *(p for p in task.probe_dtypes(device) if p != dtype)]:
        try:
            rep = validate(task, fn, path, device, dt, seed)
        except NodiceError:
            if dt == dtype:
                raise
            continue  # the pipeline skips a probe dtype the kernel rejects
        if rep.mismatch is not None:
            raise SystemExit(f"{task.name}: the candidate fails in {dt}: {rep.mismatch.line()}")
        totals["kernel_calls"] += rep.kernel_calls
        totals["contexts"] += rep.contexts_run
        totals["kernel_ms"] += rep.kernel_ms
        # Older gates report no phases: the script also times them, for a before/after on one machine.
        for name, ms in getattr(rep, "phases", {}).items():
            phases[name] += ms
    ms = (time.perf_counter() - t0) * 1e3
    phases["other"] = max(0.0, ms - sum(phases.values()))
    return {"ms": ms, **totals, "phases": phases}


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (results name no machine's folders)."""
    root = EXAMPLES.parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def bench_task(
    name: str, candidate: Path | None, device: torch.device, n: int, guards: bool
) -> dict[str, Any]:
    task = get_task(name)
    path = (candidate or EXAMPLES / name / "seed.py").resolve()
    dtype = task.dtype_for(device)
    harness_ms = [0.0]
    guardian = None
    if guards:
        from nodice.evaluation.guards.guardian import Guardian

        guardian = Guardian(task, device, dtype, seed=0)
    cand = load_kernel(path, "kernel", task, device, dtype)
    if guardian is not None:
        cand = guardian(cand)  # its probes make the first (compiling) calls
        check_harness = guardian.check_harness

        def timed_check(when: str, hot: bool = False) -> None:
            t0 = time.perf_counter()
            check_harness(when, hot)
            harness_ms[0] += (time.perf_counter() - t0) * 1e3

        guardian.check_harness = timed_check  # type: ignore[method-assign]
    dynamic_stage(task, cand.fn, cand.path, device, seed=0)  # warm-up: compilation, allocator, caches
    runs = []
    for _ in range(n):
        harness_ms[0] = 0.0
        run = dynamic_stage(task, cand.fn, cand.path, device, seed=0)
        if guardian is not None:
            run["phases"]["guard_harness_check"] = harness_ms[0]
            run["phases"]["kernel"] = max(0.0, run["phases"].get("kernel", 0.0) - harness_ms[0])
        runs.append(run)
    mid = sorted(runs, key=lambda r: r["ms"])[len(runs) // 2]
    return {
        "candidate": _shown(path),
        "dtype": str(dtype).removeprefix("torch."),
        "median_ms": round(statistics.median(r["ms"] for r in runs), 1),
        "min_ms": round(min(r["ms"] for r in runs), 1),
        "runs_ms": [round(r["ms"], 1) for r in runs],
        "kernel_calls": int(mid["kernel_calls"]),
        "contexts": int(mid["contexts"]),
        "kernel_ms": round(mid["kernel_ms"], 1),
        "phases_ms": {k: round(v, 1) for k, v in mid["phases"].items()},
        "ms_per_call": round(mid["ms"] / max(1, mid["kernel_calls"]), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None)
    ap.add_argument("--task", action="append", help="task name (repeatable; default rmsnorm)")
    ap.add_argument("--candidate", type=Path, help="candidate file (default: each task's seed)")
    ap.add_argument("--n", type=int, default=5, help="timed runs after the warm-up")
    ap.add_argument("--no-guards", action="store_true", help="the gate alone, as `nodice check` runs it")
    ap.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "dynamic_speed.json")
    args = ap.parse_args()

    device = resolve_device(args.device)
    prepare(device)  # before any candidate is imported: the interpreter on CPU
    from nodice.measuring.provenance import environment

    machine, versions = environment(device.type)
    result: dict[str, Any] = {
        "device": device.type,
        "machine": machine,
        "versions": versions,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "guards": not args.no_guards,
        "n": args.n,
        "target_ms": TARGET_MS,
        "tasks": {},
    }
    for name in args.task or ["rmsnorm"]:
        row = bench_task(name, args.candidate, device, args.n, not args.no_guards)
        result["tasks"][name] = row
        phases = ", ".join(f"{k} {v:.0f}" for k, v in row["phases_ms"].items())
        print(
            f"{name:<18} median {row['median_ms']:8.1f} ms (min {row['min_ms']:.1f}) "
            f"{row['kernel_calls']} calls, {row['contexts']} contexts, {row['ms_per_call']:.3f} ms/call; "
            f"phases ms: {phases}",
            flush=True,
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
