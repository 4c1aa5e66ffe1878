"""GPU check of every library baseline: it loads, computes its task, setup stays untimed, BI verdict.

    PYTHONPATH=.:/tmp/site python3 bench/gpu/baselines.py [--task attention_decode ...] [--no-audit]

With the wheels of bench/gpu/WHEELS.md installed in /tmp/site. For each task:
the installed version of each provider, the baselines that did not load (and
why), and for each one that did: the first call's time (JIT compiles and
autotuning happen there), correctness against the task's reference on the
gate's GPU problem (the task's own rule for sampling), ``prepare()`` against
the plain call, and the BI audit (``audit_baseline``: the task's dtype and the
probe dtypes the library takes). Writes ``gpu_baselines.json`` to $OUT (or
the current folder) after every task and prints one line per baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from nodice.gate.correctness import compare, has_own_correctness
from nodice.measuring.baselines import audit_baseline, baselines_for, load_baselines, provider_versions
from nodice.tasks import CATALOG, get_task


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def check_one(
    task_name: str, name: str, impl: Any, device: torch.device, audit: bool, seed: int
) -> dict[str, Any]:
    task = get_task(task_name)
    dtype = task.dtype_for(device)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, device, dtype)
    args = task.compose(problem, task.samples(problem, gen, 3), gen)
    row: dict[str, Any] = {"task": task_name, "baseline": name}
    try:
        t0 = time.perf_counter()
        out = impl(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        row["first_call_s"] = round(time.perf_counter() - t0, 2)
        if has_own_correctness(task):
            report = task.check_correctness(lambda a: impl(*a), device, dtype, seed)
            row["correct"], row["detail"] = bool(report and report.ok), report.detail if report else ""
        else:
            ok, detail, worst = compare(task, out, task.reference(*args), dtype)
            row["correct"], row["detail"], row["max_abs_err"] = ok, detail, worst
            prepare = getattr(impl, "prepare", None)
            if prepare is not None:
                same = zip(_as_tuple(prepare(*args)()), _as_tuple(impl(*args)), strict=True)
                row["prepare_matches"] = all(torch.equal(a, b) for a, b in same)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        return row
    if audit:
        t0 = time.perf_counter()
        result = audit_baseline(task, impl, device, seed, name=name)
        row["bi"] = {
            "verdict": result.verdict,
            "detail": result.detail,
            "dtypes": list(result.dtypes),
            "context": result.context,
            "s": round(time.perf_counter() - t0, 1),
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", action="append", choices=CATALOG, help="only these tasks")
    parser.add_argument("--no-audit", action="store_true", help="skip the BI audits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the torch baselines")
    opts = parser.parse_args()
    device = torch.device(opts.device)
    tasks = opts.task or list(CATALOG)
    out_path = Path(os.environ.get("OUT", ".")) / "gpu_baselines.json"
    every = [b for t in tasks for b in baselines_for(t, device)]
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "versions": provider_versions(every),
        "missing": {},
        "rows": [],
    }
    print(json.dumps(report["versions"]), flush=True)
    for task_name in tasks:
        loaded, missing = load_baselines(task_name, device)
        for name, reason in missing.items():
            report["missing"][name] = reason
            print(f"{task_name:18} {name:42} missing: {reason}", flush=True)
        for name, impl in loaded.items():
            row = check_one(task_name, name, impl, device, not opts.no_audit, opts.seed)
            report["rows"].append(row)
            bi = row.get("bi", {})
            summary = row.get("error") or (
                f"correct={row['correct']} prepare={row.get('prepare_matches', '-')} "
                f"first={row['first_call_s']}s bi={bi.get('verdict', '-')} {bi.get('context', '')}"
            )
            print(f"{task_name:18} {name:42} {summary}", flush=True)
        out_path.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
