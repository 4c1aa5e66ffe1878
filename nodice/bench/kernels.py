"""``nodice bench kernels``: every task's best bundled kernel against every library baseline, in one run.

Per task, one sandboxed evaluation (:class:`nodice.evaluation.Evaluator`)
runs the whole gate on the kernel on this device, then benchmarks it and every
baseline of the task on every workload with the same method, and audits each
baseline for batch invariance with the gate's dynamic stage. The device's
ceilings (dense matmul rate, copy bandwidth) are measured once at the start and
handed to every evaluation, so every ``limit_fraction`` in the report divides
by the same numbers.

Before the first task is measured, a warm-up phase (:mod:`nodice.bench.warm`)
runs every compile, JIT build and baseline audit of the run side by side in a
pool of worker processes; the measuring phase then times the tasks one after
another on an idle GPU, with the compiled code on disk and the audits' verdicts
handed over (``warm_workers=0`` skips the warm-up: everything then happens in
the measuring phase, as one task after another).

On a Ray cluster (``executor`` of kind ``ray``) the tasks are measured side by
side instead, one per slot (one GPU on cuda, one CPU on cpu), each in the same
sandboxed evaluation on its node; the ceilings and the machine's description
are measured once on one slot of the cluster, and the warm-up phase is skipped
(each slot compiles and audits in its own evaluation, on a device of its own).
The entries are merged into the one report in task order.

The JSON (SPEC §6) is rewritten after every task, so a run stopped half-way
keeps what it finished; ``resume`` skips the tasks a previous report already
holds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodice.bench.kernels_table import invariant_ratios
from nodice.bench.output import write_report
from nodice.errors import NodiceError
from nodice.evaluation.executor import ExecutorConfig
from nodice.evaluation.request import BenchOptions
from nodice.kernels import bundled_kernel
from nodice.measuring.score import WorkloadScore, baseline_levels, geomean_ratio_best

REPO_ROOT = Path(__file__).resolve().parents[2]
FORMAT = 1


class KernelBenchError(NodiceError):
    kind = "kernel benchmark"


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def _sig(value: float | None, digits: int = 4) -> float | None:
    """``value`` to ``digits`` significant digits (ratios on CPU can be 1e-4, throughputs 1e3)."""
    return None if value is None else float(f"{value:.{digits}g}")


def workload_record(s: WorkloadScore) -> dict[str, Any]:
    """One workload as SPEC §6 writes it (plus the times and the correctness detail)."""
    return {
        "name": s.workload,
        "params": dict(s.params),
        "ms": s.ms,
        "throughput": _sig(s.score, 5),
        "limit_fraction": _sig(s.limit_fraction),
        **({"copy_fraction": _sig(s.copy_fraction)} if s.copy_fraction is not None else {}),
        "correct": s.correct,
        "detail": s.detail,
        "baselines": {
            name: {
                "throughput": _sig(b.throughput, 5),
                "ms": b.ms,
                "ratio": _sig(b.ratio),
                "bi": b.bi,
                "correct": b.correct,
                **({"detail": b.detail} if b.detail else {}),
            }
            for name, b in s.baselines.items()
        },
        "best_baseline": s.best_baseline,
        "ratio_best": _sig(s.ratio_best),
        "notes": [n for n in s.notes if "missing:" not in n],
    }


def task_record(task_name: str, kernel: Path, evaluation: Any) -> dict[str, Any]:
    """A task's entry: the kernel, its gate verdict here, its workloads, the baselines' BI verdicts."""
    from nodice.tasks import get_task

    scores: list[WorkloadScore] = list(evaluation.scores)
    meta = dict(evaluation.bench)
    measured = baseline_levels(scores)
    levels = {name: _sig(measured.get(name), 5) for name in meta.get("baselines", [])}
    ratio = geomean_ratio_best(scores)
    record = {
        "kernel": _relative(kernel),
        "unit": get_task(task_name).unit,
        "verdict": evaluation.verdict,
        "reason": evaluation.check.reason or evaluation.check.error or "",
        "geomean": _sig(evaluation.geomean, 5),
        "ratio_best_geomean": _sig(ratio),
        "baseline_geomeans": levels,
        "baselines_bi": meta.get("bi", {}),
        "baselines_missing": meta.get("missing", {}),
        "evaluation_s": round(evaluation.ms / 1e3, 1),
        # The node of the cluster that measured it under --executor ray (None: this machine).
        "node": evaluation.environment.get("ray_node"),
        # Where the time went: the gate's stages, the benchmark, loading and auditing the baselines.
        "timings_ms": {k: round(v, 1) for k, v in evaluation.timings.items()},
        "baselines_load_s": meta.get("load_s"),
        "baselines_audit_s": meta.get("audit_s", {}),
        # Where a worker that crashed or hung stopped (its Python stacks when it ran out of time).
        **({"log": evaluation.log[-3000:]} if evaluation.verdict == "error" and evaluation.log else {}),
        "workloads": [workload_record(s) for s in scores],
    }
    # nodice against the batch-invariant baselines alone (those whose BI audit here passed).
    ratios, geomean_bi = invariant_ratios(record)
    for workload, ratio_bi in zip(record["workloads"], ratios, strict=True):
        workload["ratio_best_bi"] = _sig(ratio_bi)
    record["ratio_best_bi_geomean"] = _sig(geomean_bi)
    return record


def _write(path: Path, report: dict[str, Any]) -> None:
    """The report, whole or not at all (through a symlink); an error line when it cannot be written."""
    write_report(path, json.dumps(report, indent=1) + "\n", "--json")


def load_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8 text
        raise KernelBenchError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
        raise KernelBenchError(f"{path} is not a kernel benchmark report (no 'tasks' object)")
    # What a resumed call adds to: the versions and ceilings objects, each task an object.
    for key in ("versions", "ceilings"):
        if not isinstance(data.get(key, {}), dict):
            raise KernelBenchError(f"{path} is not a kernel benchmark report ('{key}' is not an object)")
    data.setdefault("versions", {})
    bad = [t for t, e in data["tasks"].items() if not isinstance(e, dict)]
    if bad:
        raise KernelBenchError(f"{path} is not a kernel benchmark report (task {bad[0]} is not an object)")
    return data


def new_report(
    device: str, ceilings: Any, versions: dict[str, str], machine: str, executor: str = "local"
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "executor": executor,
        "device": machine,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["nodice", *sys.argv[1:]]) if sys.argv else "",
        "versions": versions,
        "limits": ceilings.limits(),
        "ceilings": ceilings.to_dict(),
        "device_type": device,
        "tasks": {},
    }


def run_kernel_bench(
    device: str,
    tasks: list[str],
    *,
    seed: int = 0,
    timeout_s: float = 1200.0,
    workloads: dict[str, list[str]] | None = None,
    json_path: Path | None = None,
    resume: bool = False,
    on_start: Callable[[str, Path], None] | None = None,
    on_done: Callable[[str, dict[str, Any]], None] | None = None,
    warm_workers: int | None = None,
    on_warm: Callable[[int, Any], None] | None = None,
    executor: ExecutorConfig | None = None,
) -> dict[str, Any]:
    """Benchmark ``tasks`` on ``device``; returns (and, with ``json_path``, keeps writing) the report.

    ``executor`` of kind ``ray``: the tasks are measured side by side on the cluster's slots.
    ``warm_workers``: processes of the warm-up phase (None: about one per core; 0: no warm-up).
    ``on_warm(total_jobs, result)`` is called once with ``result=None`` before the warm-up, then
    after each of its jobs.
    """
    import torch

    from nodice.bench import warm
    from nodice.evaluation import Evaluator
    from nodice.measuring.baselines import baselines_for, provider_versions
    from nodice.measuring.baselines.audit import audit_dtypes, dtype_name
    from nodice.measuring.ceilings import ceilings_for
    from nodice.measuring.provenance import environment, gpu_versions
    from nodice.tasks import get_task

    dev = torch.device(device)
    on_ray = executor is not None and executor.kind == "ray"
    # On a cluster one evaluator holds every slot; locally each task gets a fresh one.
    cluster = (
        Evaluator(device=device, isolation="isolated", timeout_s=timeout_s, executor=executor)
        if on_ray
        else None
    )
    try:
        if resume and json_path is not None and json_path.exists():
            report = load_report(json_path)
            if report.get("device_type") not in (None, device):
                raise KernelBenchError(
                    f"{json_path} was measured on {report.get('device_type')}, not {device}"
                )
            here = None if on_ray else environment(device)[0]
            if here is not None and report.get("device") not in (None, here):
                # One report holds one machine's numbers: its rows are compared with each other.
                raise KernelBenchError(
                    f"{json_path} was measured on {report.get('device')}, not on this machine ({here})"
                )
            ceilings_dict = report.get("ceilings") or {}
        elif on_ray:
            from nodice.bench.ray_jobs import measure_on_cluster

            ceilings, machine, versions = measure_on_cluster(device)
            report = new_report(device, ceilings, versions, machine, "ray")
            ceilings_dict = ceilings.to_dict()
        else:
            ceilings = ceilings_for(dev)
            machine, versions = environment(device)
            versions.update(gpu_versions())
            report = new_report(device, ceilings, versions, machine)
            ceilings_dict = ceilings.to_dict()
        every = [b for t in tasks for b in baselines_for(t, dev)]
        report["versions"].update(provider_versions(every))
        todo = [t for t in tasks if t not in report["tasks"]]
        resumed = bool(todo) and bool(report["tasks"])
        if resumed:
            # A call that adds tasks keeps its own date, command and warm-up next to the first call's.
            report.setdefault("resumed", []).append(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "command": " ".join(["nodice", *sys.argv[1:]]) if sys.argv else "",
                }
            )
        warmed: warm.WarmReport | None = None
        warm.cache_environment()
        if todo and warm_workers != 0 and not on_ray:
            jobs = warm.plan(todo, {t: bundled_kernel(t) for t in todo}, dev, workloads)
            if on_warm is not None:
                on_warm(len(jobs), None)
            warmed = warm.warm_up(
                jobs,
                device,
                seed=seed,
                workers=warm_workers,
                job_timeout_s=timeout_s,
                on_result=(lambda r: on_warm(len(jobs), r)) if on_warm is not None else None,
            )
            (report["resumed"][-1] if resumed else report)["warm_up"] = warmed.summary()
            if json_path is not None:
                _write(json_path, report)

        def measure(task_name: str) -> dict[str, Any]:
            kernel = bundled_kernel(task_name)
            audits: dict[str, dict[str, Any]] = {}
            if warmed is not None:
                dtypes = [dtype_name(d) for d in audit_dtypes(get_task(task_name), dev)]
                audits = warmed.audits(task_name, dtypes)
            t0 = time.perf_counter()
            options = BenchOptions(
                workloads=tuple((workloads or {}).get(task_name) or ()),
                audit_baselines=True,
                audits=audits,
                ceilings=ceilings_dict,
            )
            if cluster is not None:
                evaluation = cluster.evaluate(kernel, task_name, bench=True, seed=seed, bench_options=options)
            else:
                with Evaluator(device=device, isolation="isolated", timeout_s=timeout_s) as ev:
                    evaluation = ev.evaluate(kernel, task_name, bench=True, seed=seed, bench_options=options)
            entry = task_record(task_name, kernel, evaluation)
            entry["evaluation_s"] = round(time.perf_counter() - t0, 1)
            if warmed is not None:
                # Audits taken in the warm-up are marked so: the measuring phase did not spend that time.
                entry["baselines_audited_in_warm_up"] = sorted(audits)
                entry["warm_up_s"] = round(
                    sum(r.seconds for r in warmed.results if r.job.task == task_name), 1
                )
            return entry

        def keep(task_name: str, entry: dict[str, Any]) -> None:
            report["tasks"][task_name] = entry
            if json_path is not None:
                _write(json_path, report)
            if on_done is not None:
                on_done(task_name, entry)

        if cluster is None:
            for task_name in todo:
                if on_start is not None:
                    on_start(task_name, bundled_kernel(task_name))
                keep(task_name, measure(task_name))
        else:
            with ThreadPoolExecutor(max_workers=max(1, cluster.workers)) as pool:
                futures = []
                for task_name in todo:
                    if on_start is not None:
                        on_start(task_name, bundled_kernel(task_name))
                    futures.append((task_name, pool.submit(measure, task_name)))
                for task_name, future in futures:  # merged in task order, whichever slot was first
                    keep(task_name, future.result())
    finally:
        if cluster is not None:
            cluster.close()
    return report
