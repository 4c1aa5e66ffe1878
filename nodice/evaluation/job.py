"""One evaluation inside a worker: static guards → the gate with runtime guards → the benchmark.

Runs one :class:`~nodice.evaluation.request.EvaluationRequest` (in a sandboxed worker process, or
in the caller's under ``isolation="inline"``) and returns a plain dict (it crosses a pipe): the
gate's result, the score vector, where the time went, and whether this process is still fit to run
another candidate.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nodice.errors import NodiceError, NotApplicableError
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
    from nodice.evaluation.request import BenchOptions, EvaluationRequest
    from nodice.measuring.throughput import BenchSession

# Rules whose violation may leave the process altered (patched modules, running threads or streams).
_TAINTING_RULES = {harness_tampering.RULE, background_thread.RULE, late_work.RULE}


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 3)


def _error(job: EvaluationRequest, device: str, line: str) -> CheckResult:
    return CheckResult("error", job.task, job.path, device, "", error=line, reason=line)


def error_payload(job: EvaluationRequest, device: str, line: str | NodiceError) -> dict[str, Any]:
    """The answer to a request that could not start (no such task, file or device; a reference that
    couples its samples is ``not_applicable``)."""
    result = _error(job, device, line if isinstance(line, str) else line.line())
    if isinstance(line, NotApplicableError):
        result.not_applicable(line)
    return {"check": result.to_dict(), "scores": [], "timings": {}}


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
    task: Task, device: torch.device, dtype: torch.dtype, seed: int, options: BenchOptions
) -> tuple[BenchSession, list[Workload] | None]:
    """The process's benchmark session (baselines audited for BI when asked) and the chosen workloads."""
    from nodice.measuring.ceilings import adopt_ceilings
    from nodice.measuring.throughput import BenchSession, session_for

    if options.ceilings:
        adopt_ceilings(device, dict(options.ceilings))
    session = session_for(task, device, dtype)
    if options.audit_baselines and not session.audit_baselines:
        session = BenchSession(
            task,
            device,
            dtype,
            audit_baselines=True,
            seed=seed,
            given_audits={name: dict(audit) for name, audit in options.audits.items()},
        )
    names = options.workloads
    if not names:
        return session, None
    known = {w.name: w for w in task.bench_workloads(device)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise NodiceError(f"unknown workload(s) for {task.name}: {', '.join(unknown)}")
    return session, [known[n] for n in names]


def _same_bits_stage(
    job: EvaluationRequest,
    task: Task,
    kernel: Callable[..., Any],
    workloads: list[Workload] | None,
    device: torch.device,
    dtype: torch.dtype,
) -> str | None:
    """The first bitwise difference from ``same_bits_as`` on the benchmark's workloads (None: same bits)."""
    from nodice.evaluation.same_bits import same_bits_difference

    try:
        chosen = workloads if workloads is not None else list(task.bench_workloads(device))
        return same_bits_difference(
            task, kernel, job.bench_options.same_bits_as, job.entry, chosen, device, dtype
        )
    except NodiceError as exc:
        return f"the best version could not be run: {exc.line()}"
    except Exception as exc:  # the candidate crashed on a workload input: not the same kernel
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def run_job(job: EvaluationRequest, device: torch.device) -> dict[str, Any]:
    from nodice.measuring.throughput import benchmark

    timings: dict[str, float] = {}
    seed = job.seed
    path = Path(job.path)
    try:
        if is_reference_task(job.task):
            progress.stage("reference")  # the reference file's import, get_inputs() and one Model call
        task = get_task(job.task)
        fits = getattr(task, "check_fits", None)  # a FlashInfer-Bench definition's sizes against the device's
        if fits is not None and (job.correctness or job.dynamic or job.bench):
            fits(device)  # refused before any stage runs, when its inputs cannot be held
        source = read_source(path)
    except NodiceError as exc:
        return error_payload(job, device.type, exc)

    guards = job.guards
    progress.stage("static")
    t0 = time.perf_counter()
    cheat = static_violation(source, str(path), task) if guards else None
    timings["static_guards"] = _ms(t0)
    if cheat is not None:
        result = _error(job, device.type, "")
        result.reject_as_cheat(cheat)
        result.dtype = str(task.dtype_for(device)).removeprefix("torch.")
        result.stages.append(StageResult("guards", "reject", timings["static_guards"], cheat.line()))
        result.notes.append(f"seed={seed}")
        return {"check": result.to_dict(), "scores": [], "timings": timings}

    dtype = task.dtype_for(device)
    bench = job.bench
    if bench:
        # Baselines are imported (and audited) before the candidate: a library that patches torch at
        # import must be part of the harness the candidate is compared against, not blamed on it.
        progress.stage("baselines")
        t0 = time.perf_counter()
        try:
            session, workloads = _bench_setup(task, device, dtype, seed, job.bench_options)
            session.load()
            timings["baselines"] = _ms(t0)
        except NodiceError as exc:
            return {**error_payload(job, device.type, f"benchmark: {exc.line()}"), "timings": timings}
    modules_before = set(sys.modules)
    guardian = Guardian(task, device, dtype, seed)
    result = check(
        path,
        task,
        device=device.type,
        entry=job.entry,
        static=job.static,
        correctness=job.correctness,
        dynamic=job.dynamic,
        seed=seed,
        guard=guardian if guards else None,
        contracts=list(job.contracts),
    )
    for s in result.stages:
        timings[s.name] = s.ms
    if guardian.first_call_ms is not None:
        timings["first_call"] = round(guardian.first_call_ms, 3)

    scores: list[dict[str, Any]] = []
    bench_meta: dict[str, Any] = {}
    if result.verdict == "pass" and bench and guardian.guarded and job.bench_options.same_bits_as:
        progress.stage("same_bits")
        t0 = time.perf_counter()
        differs = _same_bits_stage(job, task, guardian.guarded, workloads, device, dtype)
        timings["same_bits"] = _ms(t0)
        result.stages.append(
            StageResult("same_bits", "reject" if differs else "pass", timings["same_bits"], differs or "")
        )
        bench = not differs
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
                    host_lines_of=path if job.bench_options.host_lines else None,
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
        result.reject_as_cheat(guardian.violation)
        scores = []
        result.stages.append(StageResult("guards", "reject", 0.0, guardian.violation.line()))
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
