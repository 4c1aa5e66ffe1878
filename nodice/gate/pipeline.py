"""The BI gate: static analysis → reference correctness → dynamic validation, each rejection final."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.errors import DeviceError, KernelCrashError, NodiceError, NotApplicableError, OutputSpecError
from nodice.gate import progress
from nodice.gate.applicability import check_applicable
from nodice.gate.branches import BranchWatch, confirmable
from nodice.gate.correctness import check_correctness
from nodice.gate.dynamic import VALUE_SEARCH, DynamicReport, validate
from nodice.gate.result import CheatDetected, CheckResult, Finding, Mismatch, StageResult, StageVerdict
from nodice.gate.runtime import CPU_NOTE, prepare, resolve_device
from nodice.gate.static import triton_globals
from nodice.gate.static.project import cuda_code
from nodice.gate.thresholds import scan, straddling
from nodice.loader import Candidate, check_source, load_kernel
from nodice.tasks import Task, get_task


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 3)


def _probe_dtypes(
    t: Task,
    fn: Callable[..., Any],
    path: Path,
    dev: torch.device,
    dtype: torch.dtype,
    seed: int,
    result: CheckResult,
    witnesses: int | None = None,
    notes: bool = True,
) -> Mismatch | None:
    """Dynamic validation again in the task's probe dtypes; a kernel that rejects a dtype is skipped."""
    for probe in t.probe_dtypes(dev):
        if probe == dtype:
            continue
        name = str(probe).removeprefix("torch.")
        try:
            rep = validate(t, fn, path, dev, probe, seed, witnesses=witnesses)
        except NodiceError as exc:
            if notes:
                result.notes.append(f"{name} probe skipped: the kernel does not run in {name} ({exc.line()})")
            continue
        if rep.mismatch is not None:
            rep.mismatch.context["dtype"] = name
            return rep.mismatch
        if notes:
            result.notes.append(f"{name} probe: no mismatch in {rep.contexts_run} contexts")
    return None


# Clearing a static finding takes more evidence than a plain pass: after the usual round, two
# more (fresh problems, batchmates and seeds, at least SETTLE_WITNESSES tracked witnesses, every
# probe dtype), and up to SEARCH_ROUNDS more while a watched side has not run. A violating choice
# that one round misses (a fast path whose bits differ only for some batchmates) is caught by one
# of them; a violating candidate stops at its first mismatch, so only a cleared one pays for all.
SETTLE_ROUNDS = 2
SEARCH_ROUNDS = 2
SETTLE_WITNESSES = 8


def _count(stats: dict[str, Any], drep: DynamicReport) -> None:
    """Add one more round's contexts, calls and kernel time to the dynamic stage's stats."""
    stats["contexts"] += drep.contexts_run
    stats["kernel_calls"] += drep.kernel_calls
    stats["kernel_ms"] = round(stats["kernel_ms"] + drep.kernel_ms, 3)


def _search_values(
    t: Task,
    fn: Callable[..., Any],
    path: Path,
    dev: torch.device,
    dtype: torch.dtype,
    seed: int,
    contexts: list[Any],
    watch: BranchWatch,
    result: CheckResult,
    stats: dict[str, Any],
) -> DynamicReport | None:
    """Rounds with inputs off the task's distribution (``gate.dynamic.VALUE_SEARCH``) while a watched
    side has not run: a map that runs a side it had not is given ``SETTLE_ROUNDS`` more rounds (fresh
    batchmates and seeds), one that does not is left after one. The first report with a mismatch, or
    ``None``. A kernel that crashes on such inputs leaves its map unjudged (a note), and what the
    watch saw in that round unsaid: the sides stay as they were.
    """

    def missing() -> int:
        return sum(len(w.missing()) for w in watch.watches)

    for values in VALUE_SEARCH:
        if not watch.uncovered():
            break
        before = missing()
        for extra in range(1 + SETTLE_ROUNDS):
            seen = [set(w.seen) for w in watch.watches]
            try:
                drep = validate(
                    t,
                    fn,
                    path,
                    dev,
                    dtype,
                    seed + extra,
                    contexts=contexts,
                    witnesses=SETTLE_WITNESSES,
                    values=values,
                )
            except (KernelCrashError, OutputSpecError) as exc:
                for w, s in zip(watch.watches, seen, strict=True):
                    w.seen = s
                result.notes.append(
                    f"inputs with {values.name}: not judged, the kernel failed on them ({exc.line()})"
                )
                break
            _count(stats, drep)
            stats["value_rounds"] = stats.get("value_rounds", 0) + 1
            if drep.mismatch is not None:
                return drep
            if missing() == before:
                break  # this map reaches no side the task's inputs missed
        seed += 1 + SETTLE_ROUNDS
    return None


def _settle(watch: BranchWatch, result: CheckResult) -> None:
    """After a dynamic stage without a mismatch: clear the watched findings whose sides all ran;
    one side that never ran leaves its finding standing, and the candidate rejected."""
    open_ = watch.uncovered()
    for w in watch.watches:
        if w.covered():
            w.finding.severity = "cleared"
            ran = (
                f"{w.branch['function']} ran with two settings of {w.branch['param']}"
                if w.kind == "launch"
                else "both sides of the batch-dependent choice ran"
            )
            result.notes.append(
                f"{w.finding.file}:{w.finding.line} cleared: {ran} in dynamic validation and no tracked "
                "sample's bits changed"
            )
    stats = {"watched": len(watch.watches), "cleared": len(watch.watches) - len(open_)}
    if not open_:
        result.stages.append(StageResult("branches", "pass", 0.0, "", stats))
        return
    w = open_[0]
    why = w.unseen()
    result.stages.append(
        StageResult("branches", "reject", 0.0, f"{w.finding.file}:{w.finding.line}: {why}", stats)
    )
    result.verdict = "bi_violation"
    result.reason = f"static: {w.finding.message} ({why})"


def _reference_too(
    t: Task, dev: torch.device, dtype: torch.dtype, seed: int, contexts: list[Any], result: CheckResult
) -> None:
    """After a mismatch on a reference file's problem: whether ``Model`` itself, unchanged and in the
    judged dtype, changes a sample's bits the same way on this device; if so, a note that says so
    (the candidate inherits it from the operators both call, not from code of its own)."""
    eager = getattr(t, "eager_model", None)
    path = getattr(getattr(t, "ref", None), "path", None)
    if eager is None or path is None:
        return
    try:
        model = eager(dev, dtype)

        def run(*args: Any) -> Any:
            with torch.no_grad():
                return model(*args)

        rep = validate(t, run, Path(path), dev, dtype, seed, contexts=contexts)
    except Exception:  # the reference's own failure is not this verdict's business
        return
    if rep.mismatch is not None:
        name = getattr(t, "reference_name", "Model")
        where = f"{dev.type}, {str(dtype).removeprefix('torch.')}"
        other = "a GPU" if dev.type == "cpu" else "another GPU or library version"
        result.notes.append(
            f"{name} itself (the reference, unchanged) is not batch-invariant on this device ({where}): "
            f"{rep.mismatch.line()}; the library operators it calls give a sample other bits in another "
            f"batch here, and a candidate that keeps them inherits that ({other} may not)"
        )


def check(
    path: str | Path,
    task: Task | str,
    *,
    device: str | None = None,
    entry: str = "kernel",
    static: bool = True,
    correctness: bool = True,
    dynamic: bool = True,
    seed: int | None = None,
    guard: Callable[[Candidate], Candidate] | None = None,
    contracts: list[str] | None = None,
) -> CheckResult:
    """Judge one candidate file for ``task``. Never raises for a bad candidate: returns verdict ``error``.

    The evaluation service hands over the task it resolved; a catalog name is resolved here (the
    Python API, ``nodice.check(path, "rmsnorm")``).
    """
    candidate = str(path)
    result = CheckResult("pass", task if isinstance(task, str) else task.name, candidate, device or "", "")
    watch: BranchWatch | None = None
    pending: list[Finding] = []  # static findings that running both sides may settle
    try:
        t = get_task(task) if isinstance(task, str) else task
        dev = resolve_device(device)
        dtype = t.dtype_for(dev)
        result.device, result.dtype = dev.type, str(dtype).removeprefix("torch.")
        seed = secrets.randbits(31) if seed is None else seed
        result.notes.append(f"seed={seed}")
        t0 = time.perf_counter()
        # The operator first: a reference that couples samples blames no one.
        if check_applicable(t, dev, seed, runs=correctness or dynamic):
            result.stages.append(StageResult("applicability", "pass", _ms(t0)))
        p = Path(path)
        # A file that does not parse or never binds its entry point is refused before any stage.
        source = check_source(p, entry)
        if dev.type == "cpu" and "triton" in source:
            result.notes.insert(0, CPU_NOTE)  # how its Triton kernels run here
        portability = triton_globals.note(triton_globals.nonconstexpr_globals(source))
        if portability:
            result.notes.append(portability)

        if static:
            from nodice.gate.static import run_static

            progress.stage("static")
            t0 = time.perf_counter()
            findings, unresolved = run_static(p, t, [Path(c) for c in contracts or []], entry=entry)
            result.findings = findings + unresolved
            # Choices between algorithms that running both sides can settle go to the dynamic stage;
            # any other violation (or a gate without that stage) rejects here.
            pending = [f for f in findings if confirmable(f)] if dynamic else []
            settle = bool(findings) and len(pending) == len(findings)
            verdict: StageVerdict = (
                "unresolved" if settle or (unresolved and not findings) else "reject" if findings else "pass"
            )
            counts = {"findings": len(findings), "unresolved": len(unresolved)}
            detail = ""
            if settle:
                counts["to_settle"] = len(pending)
                detail = (
                    f"{len(pending)} batch-dependent choice(s) between algorithms: dynamic validation "
                    "must run both sides (a kernel parameter: two settings) with every tracked sample's "
                    "bits unchanged"
                )
                watch = BranchWatch(pending, p)
            result.stages.append(StageResult("static", verdict, _ms(t0), detail, counts))
            if findings and not settle:
                result.verdict = "bi_violation"
                result.reason = f"static: {findings[0].message}"
                return result

        if not (correctness or dynamic):
            return result
        cuda = cuda_code(p) if dev.type == "cpu" else None
        if cuda is not None:
            # Native CUDA cannot run here; what could be judged without running it has been.
            done = "static analysis found no BI violation" if static else "static analysis did not run"
            raise DeviceError(
                f"{cuda}: native CUDA code runs on a CUDA device only ({done}); correctness and dynamic "
                "validation need --device cuda"
            )
        prepare(dev)
        progress.stage("load")
        t0 = time.perf_counter()
        cand = load_kernel(p, entry, t, dev, dtype)
        result.stages.append(StageResult("load", "pass", _ms(t0)))
        if guard is not None:
            # Anti-cheat probes on the loaded kernel; may wrap it to watch every later call.
            progress.stage("guards")
            t0 = time.perf_counter()
            try:
                cand = guard(cand)
            except CheatDetected as exc:
                result.stages.append(StageResult("guards", "reject", _ms(t0), exc.line()))
                raise
            result.stages.append(StageResult("guards", "pass", _ms(t0)))

        if correctness:
            progress.stage("correctness")
            t0 = time.perf_counter()
            rep = check_correctness(t, cand.fn, cand.path, dev, dtype, seed)
            result.stages.append(
                StageResult(
                    "correctness",
                    "pass" if rep.ok else "reject",
                    _ms(t0),
                    rep.detail,
                    {"trials": rep.trials, "max_abs_err": rep.max_abs_err},
                )
            )
            if not rep.ok:
                result.verdict = "incorrect"
                result.reason = f"correctness: {rep.detail}"
                if pending:
                    # The batch also picks this candidate's path: likely where the error comes from.
                    f = pending[0]
                    line = (f.branch or {}).get("line", f.line)
                    result.reason += (
                        f"; the batch chooses the path at line {line} ({f.rule}: {f.message}), "
                        "not yet run on both sides"
                    )
                return result

        if dynamic:
            progress.stage("dynamic")
            t0 = time.perf_counter()
            # A watched candidate is traced until its choices are made in each call (gate.branches).
            fn = watch.wrap(cand.fn) if watch is not None else cand.fn
            # Batch sizes the candidate compares its batch (or its elements) against, straddled.
            sizes = straddling(scan(cand.path).batch_sizes(t.sample_elements()))
            contexts = t.contexts(dev) + t.threshold_contexts(dev, sizes)
            drep = validate(t, fn, cand.path, dev, dtype, seed, contexts=contexts)
            mm = (
                None
                if drep.mismatch is not None
                else _probe_dtypes(t, fn, cand.path, dev, dtype, seed, result)
            )
            stats: dict[str, Any] = {
                "contexts": drep.contexts_run,
                "kernel_calls": drep.kernel_calls,
                "kernel_ms": round(drep.kernel_ms, 3),
            }
            rounds = 1
            while watch is not None and mm is None and drep.mismatch is None:
                if rounds > SETTLE_ROUNDS + (SEARCH_ROUNDS if watch.uncovered() else 0):
                    break
                drep = validate(
                    t, fn, cand.path, dev, dtype, seed + rounds, contexts=contexts, witnesses=SETTLE_WITNESSES
                )
                if drep.mismatch is None:
                    mm = _probe_dtypes(
                        t, fn, cand.path, dev, dtype, seed + rounds, result, SETTLE_WITNESSES, notes=False
                    )
                rounds += 1
                _count(stats, drep)
                stats["rounds"] = rounds
            if watch is not None and mm is None and drep.mismatch is None and watch.uncovered():
                drep = (
                    _search_values(
                        t, fn, cand.path, dev, dtype, seed + rounds, contexts, watch, result, stats
                    )
                    or drep
                )
            if drep.mismatch is not None:
                result.stages.append(StageResult("dynamic", "reject", _ms(t0), drep.mismatch.line(), stats))
                result.verdict = "bi_violation"
                result.mismatch = drep.mismatch
                result.reason = f"dynamic: {drep.mismatch.line()}"
                _reference_too(t, dev, dtype, seed, contexts, result)
                return result
            if mm is not None:
                result.stages.append(StageResult("dynamic", "reject", _ms(t0), mm.line(), stats))
                result.verdict = "bi_violation"
                result.mismatch = mm
                result.reason = f"dynamic ({mm.context['dtype']} probe): {mm.line()}"
                return result
            result.stages.append(StageResult("dynamic", "pass", _ms(t0), "", stats))
            if watch is not None:
                _settle(watch, result)
    except CheatDetected as exc:
        result.reject_as_cheat(exc)
    except NotApplicableError as exc:
        result.not_applicable(exc)
    except NodiceError as exc:
        result.verdict = "error"
        result.error = exc.line()
        result.reason = exc.line()
    return result
