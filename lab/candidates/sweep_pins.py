"""The loop the pin sweeps share: time a reference kernel, the task's library baselines and a
candidate under each of its pin tables, on every workload of the task (GPU, bf16).

Timing is nodice's CUDA timer (the benchmark's method, head start included). Each pin table is
applied to every workload (the candidate's own settings, timed first, may still choose per
workload: the gemm and moe candidates' tile rules). One JSON line per (task,
implementation, setting, workload) is appended to ``--out`` as it goes. The entry points are
``sweep_norms.py``, ``sweep_mla.py``, ``sweep_gemm.py``, ``sweep_gemm_splitk.py``,
``sweep_decode_fused.py`` (the one-launch paged decode).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nodice.measuring.baselines import load_baselines
from nodice.measuring.throughput import timed_call, workload_args
from nodice.measuring.timing import measure
from nodice.tasks import get_task
from nodice.tasks.base import Workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Sweep:
    """One task's sweep: the reference kernel (named ``reference`` in the output), the candidate
    file in this folder, and the pin tables tried on it, likeliest first."""

    task: str
    reference: Path
    reference_name: str
    candidate: str | Path  # a file name next to this script, or a path (a bundled kernel)
    tables: Callable[[], list[dict[str, Any]]]
    # The workloads the pin tables are timed on (the candidate's own settings run on every one);
    # None: every workload.
    table_workloads: Callable[[Workload], bool] | None = None
    # Pins set on the reference after loading it (a bundled kernel at another setting).
    reference_pins: dict[str, Any] | None = None


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


# Errors after which the CUDA context is unusable: every later launch fails the same way.
_STICKY = ("illegal memory access", "unspecified launch failure", "misaligned address", "illegal instruction")


def _sticky(exc: BaseException) -> bool:
    return any(s in str(exc) for s in _STICKY)


def main(plan: list[Sweep]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=150.0)
    args = ap.parse_args()
    device = torch.device("cuda")
    dtype = torch.bfloat16
    deadline = time.monotonic() + args.seconds
    out = open(args.out, "a")  # noqa: SIM115 (appended to line by line until the end)
    for i, sweep in enumerate(plan):
        task_name = sweep.task
        task_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(plan) - i)
        task = get_task(task_name)
        workloads = task.workloads()
        inputs = {w.name: workload_args(task, w, device, dtype, 0) for w in workloads}
        gb = {w.name: task.bytes_moved(w, dtype) / 1e9 for w in workloads}
        reference = _load(sweep.reference, f"reference_{task_name}")
        for k, v in (sweep.reference_pins or {}).items():
            setattr(reference, k, v)
        impls: dict[str, Any] = {sweep.reference_name: reference.kernel}
        baselines, missing = load_baselines(task_name, device)
        impls.update(baselines)
        for name, why in missing.items():
            print(f"{task_name}: baseline {name} missing: {why}", flush=True)
        best: dict[str, float] = {}
        for name, fn in impls.items():
            ratios = []
            for w in workloads:
                t = measure(timed_call(fn, inputs[w.name]), (), device)
                gbps = gb[w.name] / (t.ms / 1e3)
                if name != sweep.reference_name:
                    best[w.name] = max(best.get(w.name, 0.0), gbps)
                out.write(
                    json.dumps(
                        {"task": task_name, "impl": name, "workload": w.name, "ms": t.ms, "gbps": gbps}
                    )
                    + "\n"
                )
                ratios.append(gbps)
            out.flush()
            print(f"{task_name} {name}: geomean {_geomean(ratios):.0f} GB/s", flush=True)
        cand = _load(HERE / sweep.candidate, f"cand_{task_name}")
        tables = sweep.tables()
        original = {k: getattr(cand, k) for k in tables[0]}
        for table in [original, *tables]:
            if time.monotonic() > task_deadline:
                print(f"{task_name}: out of time", flush=True)
                break
            for k, v in table.items():
                setattr(cand, k, v)
            vs_best: list[float] = []
            chosen = sweep.table_workloads if table is not original else None
            for w in workloads if chosen is None else [w for w in workloads if chosen(w)]:
                ms: float | None
                err: str | None
                lost = False
                try:
                    t = measure(cand.kernel, inputs[w.name], device)
                    ms, err = t.ms, None
                except Exception as exc:  # a setting that does not compile or run
                    ms, err = None, f"{type(exc).__name__}: {str(exc)[:200]}"
                    lost = _sticky(exc)
                rate = gb[w.name] / (ms / 1e3) if ms else None
                ratio = rate / best[w.name] if rate and best.get(w.name) else None
                row: dict[str, Any] = {"task": task_name, "impl": "candidate", "setting": table}
                row.update(workload=w.name, ms=ms, gbps=rate, error=err, vs_best_baseline=ratio)
                out.write(json.dumps(row) + "\n")
                if lost:
                    out.flush()
                    print(
                        f"{task_name} {table}: {err.splitlines()[0] if err else ''}; the CUDA context is "
                        "lost, so the sweep stops here (rerun without this setting)",
                        flush=True,
                    )
                    return 3
                if ratio:
                    vs_best.append(ratio)
            out.flush()
            low = min(vs_best, default=float("nan"))
            print(
                f"{task_name} {table}: × best baseline {_geomean(vs_best):.3f}, lowest {low:.3f}", flush=True
            )
        for k, v in original.items():
            setattr(cand, k, v)
    return 0
