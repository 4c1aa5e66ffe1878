"""One evaluation inside a worker: static guards → the gate with runtime guards → the benchmark.

Returns a plain dict (it crosses a pipe): the gate's result, the score vector,
where the time went, and whether this process is still fit to run another
candidate.
"""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nodice.errors import NodiceError
from nodice.evaluation.guards import background_thread, harness_tampering, static_violation
from nodice.evaluation.guards import unsynchronized_work as late_work
from nodice.evaluation.guards.guardian import Guardian
from nodice.gate import progress
from nodice.gate.pipeline import check
from nodice.gate.result import CheatDetected, CheckResult, StageResult
from nodice.loader import read_source
from nodice.references import is_reference_task
from nodice.tasks import get_task
from nodice.tasks.base import Task, Workload

if TYPE_CHECKING:
    from nodice.measuring.throughput import BenchSession

# Rules whose violation may leave the process altered (patched modules, running threads or streams).
_TAINTING_RULES = {harness_tampering.RULE, background_thread.RULE, late_work.RULE}


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 3)


def _error(job: dict[str, Any], device: torch.device, line: str) -> CheckResult:
    return CheckResult("error", job["task"], job["path"], device.type, "", error=line, reason=line)


def _forget_candidate_modules(before: set[str], folder: Path) -> None:
    """Drop the candidate and the sibling files it imported, so the next candidate starts clean."""
    for name in set(sys.modules) - before:
        if name == "nodice" or name.startswith("nodice."):
            continue
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) or ""
        if name.startswith("nodice_candidate_") or (file and Path(file).resolve().is_relative_to(folder)):
            sys.modules.pop(name, None)


def _bench_setup(
    task: Task, device: torch.device, dtype: torch.dtype, seed: int, options: dict[str, Any]
) -> tuple[BenchSession, list[Workload] | None]:
    """The process's benchmark session (baselines audited for BI when asked) and the chosen workloads."""
    from nodice.measuring.ceilings import adopt_ceilings
    from nodice.measuring.throughput import BenchSession, session_for

    if options.get("ceilings"):
        adopt_ceilings(device, options["ceilings"])
    session = session_for(task, device, dtype)
    if options.get("audit_baselines") and not session.audit_baselines:
        session = BenchSession(
            task,
            device,
            dtype,
            audit_baselines=True,
            seed=seed,
            given_audits=dict(options.get("audits") or {}),
        )
    names = options.get("workloads")
    if not names:
        return session, None
    known = {w.name: w for w in task.bench_workloads(device)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise NodiceError(f"unknown workload(s) for {task.name}: {', '.join(unknown)}")
    return session, [known[n] for n in names]


def run_job(job: dict[str, Any], device: torch.device) -> dict[str, Any]:
    from nodice.measuring.throughput import benchmark

    timings: dict[str, float] = {}
    seed = job.get("seed")
    seed = secrets.randbits(31) if seed is None else int(seed)
    path = Path(job["path"])
    try:
        if is_reference_task(job["task"]):
            progress.stage("reference")  # the reference file's import, get_inputs() and one Model call
        task = get_task(job["task"])
        source = read_source(path)
    except NodiceError as exc:
        return {"check": _error(job, device, exc.line()).to_dict(), "scores": [], "timings": timings}

    guards = bool(job.get("guards", True))
    progress.stage("static")
    t0 = time.perf_counter()
    cheat = static_violation(source, str(path), task) if guards else None
    timings["static_guards"] = _ms(t0)
    if cheat is not None:
        result = _error(job, device, "")
        result.verdict, result.error, result.cheat_rule, result.reason = (
            "cheat",
            None,
            cheat.rule,
            cheat.line(),
        )
        result.dtype = str(task.dtype_for(device)).removeprefix("torch.")
        result.stages.append(StageResult("guards", "reject", timings["static_guards"], cheat.line()))
        result.notes.append(f"seed={seed}")
        return {"check": result.to_dict(), "scores": [], "timings": timings}

    dtype = task.dtype_for(device)
    bench = bool(job.get("bench", True))
    if bench:
        # Baselines are imported (and audited) before the candidate: a library that patches torch at
        # import must be part of the harness the candidate is compared against, not blamed on it.
        progress.stage("baselines")
        t0 = time.perf_counter()
        try:
            session, workloads = _bench_setup(task, device, dtype, seed, job.get("bench_options") or {})
            session.load()
            timings["baselines"] = _ms(t0)
        except NodiceError as exc:
            return {
                "check": _error(job, device, f"benchmark: {exc.line()}").to_dict(),
                "scores": [],
                "timings": timings,
            }
    modules_before = set(sys.modules)
    guardian = Guardian(task, device, dtype, seed)
    result = check(
        path,
        task.name,
        device=device.type,
        entry=job.get("entry", "kernel"),
        static=bool(job.get("static", True)),
        correctness=bool(job.get("correctness", True)),
        dynamic=bool(job.get("dynamic", True)),
        seed=seed,
        guard=guardian if guards else None,
        contracts=list(job.get("contracts") or []),
    )
    for s in result.stages:
        timings[s.name] = s.ms
    if guardian.first_call_ms is not None:
        timings["first_call"] = round(guardian.first_call_ms, 3)

    scores: list[dict[str, Any]] = []
    bench_meta: dict[str, Any] = {}
    if result.verdict == "pass" and bench and guardian.guarded and guardian.raw:
        t0 = time.perf_counter()
        try:
            scores = [
                s.to_dict()
                for s in benchmark(
                    task,
                    guardian.guarded,
                    guardian.raw,
                    device,
                    dtype,
                    seed,
                    workloads,
                    session,
                    host_lines_of=path if (job.get("bench_options") or {}).get("host_lines") else None,
                )
            ]
            bench_meta = session.describe()
            guardian.check_harness("after the benchmark")
        except CheatDetected:
            scores = []
        except NodiceError as exc:
            result.verdict, result.error, result.reason = "error", exc.line(), f"benchmark: {exc.line()}"
        timings["bench"] = _ms(t0)
        result.stages.append(StageResult("bench", "pass" if scores else "error", timings["bench"]))

    if guardian.violation is not None and result.verdict != "cheat":
        # Raised inside a kernel call, the violation reached the gate as a crash report.
        v = guardian.violation
        result.verdict, result.cheat_rule, result.reason, result.error = "cheat", v.rule, v.line(), None
        scores = []
        result.stages.append(StageResult("guards", "reject", 0.0, v.line()))
    # Exceptions raised by the candidate need no restart by themselves: the worker's health check
    # after the job (CUDA context, harness, threads) decides whether this process may go on.
    tainted = guardian.violation is not None and guardian.violation.rule in _TAINTING_RULES
    _forget_candidate_modules(modules_before, path.resolve().parent)
    return {
        "check": result.to_dict(),
        "scores": scores,
        "bench": bench_meta,
        "timings": timings,
        "tainted": tainted,
        "taint_reason": result.reason if tainted else "",
    }
