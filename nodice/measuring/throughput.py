"""The score vector of a candidate: its throughput on every workload, beside every baseline's.

For each workload the inputs are drawn once and the task's fp32 reference is
computed once; the candidate and every baseline are checked against that one
reference and timed on those inputs with the same method (:mod:`nodice.measuring.timing`).
The reference is never timed: it only says whether an output is right.

The candidate's first call is a watched one (``checked``: poisoned
allocations, output shapes and dtypes, library calls) and is compared with the
reference; the output of its last timed call (``raw``, unwrapped) is compared
too, so timed calls cannot skip the work.

A :class:`BenchSession` holds what a process shares across candidates: the
device's measured ceilings, the loaded baselines, their timings per workload
(a library does not get faster between two candidates) and, when asked, their
BI verdicts from the gate's dynamic stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nodice.errors import KernelCrashError
from nodice.gate import progress
from nodice.gate.correctness import compare, has_own_correctness
from nodice.gate.execute import check_output, describe_exception, poison_allocator
from nodice.gate.host_lines import HostLines
from nodice.gate.result import CheatDetected
from nodice.measuring.baselines import load_baselines
from nodice.measuring.ceilings import Ceilings, ceilings_for
from nodice.measuring.score import GBPS, BaselineScore, WorkloadScore
from nodice.measuring.timing import Timing, measure
from nodice.tasks.base import Output, Task, Workload

KernelFn = Callable[..., Any]


def argument_names(task: Task) -> list[str]:
    """The names of the task's arguments (:meth:`Task.argument_names`)."""
    return task.argument_names()


def describe_inputs(task: Task, args: tuple[Any, ...]) -> dict[str, Any]:
    names = argument_names(task)
    out: dict[str, Any] = {}
    for i, a in enumerate(args):
        name = names[i] if i < len(names) else f"arg{i}"
        if isinstance(a, torch.Tensor):
            out[name] = {
                "type": "random",
                "shape": list(a.shape),
                "dtype": str(a.dtype).removeprefix("torch."),
            }
        else:
            out[name] = {"type": "scalar", "value": a}
    return out


def throughput(
    task: Task, w: Workload, dtype: torch.dtype, ms: float
) -> tuple[float, float | None, float | None]:
    """(throughput in the task's unit, TFLOP/s, GB/s) of one call taking ``ms``."""
    seconds = ms * 1e-3
    if seconds <= 0:
        return 0.0, None, None
    flops, nbytes = task.flops(w), task.bytes_moved(w, dtype)
    tflops = flops / seconds / 1e12 if flops else None
    gbps = nbytes / seconds / 1e9 if nbytes else None
    value = gbps if task.unit == GBPS else tflops
    return float(value or 0.0), tflops, gbps


def _errors(out: Output, ref: Output) -> tuple[float, float]:
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    abs_err = rel_err = 0.0
    for o, r in zip(outs, refs, strict=True):
        if not (o.dtype.is_floating_point and r.dtype.is_floating_point) or not o.numel():
            continue
        d = (o.float() - r.float()).abs()
        abs_err = max(abs_err, float(d.max()))
        rel_err = max(rel_err, float((d / r.float().abs().clamp_min(1e-6)).max()))
    return abs_err, rel_err


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _run_checked(
    task: Task, fn: KernelFn, args: tuple[Any, ...], ref: Output, device: torch.device
) -> Output:
    spec = [(o.shape, o.dtype) for o in (ref if isinstance(ref, tuple) else (ref,))]
    poison_allocator(device, spec)
    progress.step()
    try:
        out = fn(*args)
        _sync(device)
    except CheatDetected:
        raise
    except Exception as exc:
        raise KernelCrashError(describe_exception(exc, None, limit=300)) from None
    outs = check_output(task, out, spec, device)
    return outs if len(outs) > 1 else outs[0]


def _as_output(value: Any) -> Output:
    return tuple(value) if isinstance(value, (tuple, list)) else value  # type: ignore[no-any-return]


def timed_call(impl: KernelFn, args: tuple[Any, ...]) -> Callable[[], Any]:
    """The zero-argument call to time: ``impl.prepare(*args)`` when the implementation has per-batch
    setup a server does outside the operation (plans, index conversions), else ``impl(*args)``."""
    prepare = getattr(impl, "prepare", None)
    if callable(prepare):
        call: Callable[[], Any] = prepare(*args)
        return call
    return lambda: impl(*args)


@dataclass
class BenchSession:
    """What one process shares across the candidates it scores for one task on one device."""

    task: Task
    device: torch.device
    dtype: torch.dtype
    audit_baselines: bool = False
    seed: int = 0
    baselines: dict[str, KernelFn] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    bi: dict[str, str] = field(default_factory=dict)
    bi_detail: dict[str, str] = field(default_factory=dict)
    # Seconds spent importing and building each baseline, and auditing it (JIT compiles show here).
    load_s: float = 0.0
    audit_s: dict[str, float] = field(default_factory=dict)
    # Verdicts audited elsewhere (the warm-up phase of a kernel benchmark): name → {verdict, detail, s}.
    # Only "pass" and "bi_violation" are taken; a baseline without one is audited here.
    given_audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    _loaded: bool = False
    _timed: dict[tuple[str, str], BaselineScore] = field(default_factory=dict)
    _copies: dict[str, float] = field(default_factory=dict)

    @property
    def ceilings(self) -> Ceilings:
        return ceilings_for(self.device)

    def copy_gbps(self, w: Workload, nbytes: float) -> float:
        """GB/s of a copy of workload ``w``'s bytes on this device, timed once per process."""
        if w.name not in self._copies:
            self._copies[w.name] = same_size_copy_gbps(nbytes, self.device)
        return self._copies[w.name]

    def load(self) -> None:
        if self._loaded:
            return
        t0 = time.perf_counter()
        self.baselines, self.missing = load_baselines(self.task.name, self.device)
        self.load_s = time.perf_counter() - t0
        self._loaded = True
        if self.audit_baselines:
            from nodice.measuring.baselines import audit_baseline

            for name, impl in self.baselines.items():
                given = self.given_audits.get(name) or {}
                if given.get("verdict") in ("pass", "bi_violation"):
                    self.bi[name], self.bi_detail[name] = given["verdict"], str(given.get("detail", ""))
                    self.audit_s[name] = round(float(given.get("s") or 0.0), 2)
                    continue
                t0 = time.perf_counter()
                audit = audit_baseline(self.task, impl, self.device, self.seed, name=name)
                self.audit_s[name] = round(time.perf_counter() - t0, 2)
                self.bi[name], self.bi_detail[name] = audit.verdict, audit.detail

    def describe(self) -> dict[str, Any]:
        """What a benchmark record carries besides the scores: ceilings, missing baselines, BI audits."""
        self.load()
        return {
            "ceilings": self.ceilings.to_dict(),
            "limits": self.ceilings.limits(),
            "baselines": sorted(self.baselines),
            "missing": dict(self.missing),
            "bi": {n: {"verdict": v, "detail": self.bi_detail.get(n, "")} for n, v in self.bi.items()},
            "load_s": round(self.load_s, 2),
            "audit_s": dict(self.audit_s),
        }

    def baseline_scores(
        self, w: Workload, args: tuple[Any, ...], ref: Output, notes: list[str]
    ) -> dict[str, BaselineScore]:
        """Every loaded baseline on this workload: checked against ``ref``, timed once per process."""
        self.load()
        own_rule = has_own_correctness(self.task)
        out: dict[str, BaselineScore] = {}
        for name, impl in self.baselines.items():
            key = (w.name, name)
            if key not in self._timed:
                try:
                    # Its first call on a shape may build the library's kernel: the harness's time.
                    progress.step("harness")
                    call = timed_call(impl, args)
                    first = _as_output(call())
                    _sync(self.device)
                    ok, detail = True, ""
                    if not own_rule:
                        ok, detail, _ = compare(self.task, first, ref, self.dtype)
                    del first
                    timing = measure(call, (), self.device)
                except Exception as exc:  # a backend that does not support this shape, dtype or device
                    notes.append(f"baseline {name} failed: {type(exc).__name__}: {str(exc).strip()[:160]}")
                    continue
                value = throughput(self.task, w, self.dtype, timing.ms)[0]
                self._timed[key] = BaselineScore(
                    ms=round(timing.ms, 6),
                    throughput=value if ok else 0.0,
                    correct=ok,
                    detail=detail,
                )
            b = self._timed[key]
            out[name] = BaselineScore(
                b.ms, b.throughput, bi=self.bi.get(name), correct=b.correct, detail=b.detail
            )
        return out


# One session per (task, device, dtype) and process: a persistent worker measures each baseline once.
_SESSIONS: dict[tuple[str, str, str], BenchSession] = {}


def session_for(task: Task, device: torch.device, dtype: torch.dtype) -> BenchSession:
    key = (task.name, str(device), str(dtype))
    if key not in _SESSIONS:
        _SESSIONS[key] = BenchSession(task, device, dtype)
    return _SESSIONS[key]


def same_size_copy_gbps(nbytes: float, device: torch.device) -> float:
    """GB/s of one device copy moving ``nbytes`` (read + write), timed as candidates are.

    A bandwidth kernel of a few hundred MB cannot reach the device's copy ceiling (measured on a
    large copy) any more than a copy of its own size can: launch, ramp and tail are a larger share
    of a short transfer. This is the bar for its size."""
    half = max(1, int(nbytes) // 2)
    src = torch.empty(half, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    timing = measure(dst.copy_, (src,), device)
    return 2 * half / (timing.ms * 1e-3) / 1e9


def workload_args(
    task: Task, w: Workload, device: torch.device, dtype: torch.dtype, seed: int
) -> tuple[Any, ...]:
    """The inputs of workload ``w`` for ``seed``: the same tensors in every process that asks."""
    gen = torch.Generator().manual_seed(seed * 1009 + 7)
    return task.workload_inputs(w, gen, device, dtype)


def score_workload(
    task: Task,
    checked: KernelFn,
    raw: KernelFn,
    w: Workload,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    session: BenchSession | None = None,
    host_lines_of: Path | None = None,
) -> WorkloadScore:
    """One entry of the score vector: the candidate (``checked`` once, ``raw`` timed) and the baselines.

    ``host_lines_of``: the candidate's file, whose host lines the checked call runs are recorded
    in ``lines_run`` (nodice.gate.host_lines).
    """
    session = session or session_for(task, device, dtype)
    args = workload_args(task, w, device, dtype, seed)
    ref = task.reference(*args)
    score = WorkloadScore(w.name, 0.0, unit=task.unit, params=dict(w.params))
    score.inputs = describe_inputs(task, args)
    own_rule = has_own_correctness(task)
    lines = HostLines(host_lines_of) if host_lines_of is not None else None
    try:
        with lines.tracing() if lines is not None else nullcontext():
            out = _run_checked(task, checked, args, ref, device)
    except KernelCrashError as exc:
        score.correct, score.detail = False, f"crashed: {exc}"
        return score
    if lines is not None:
        score.lines_run = sorted(lines.lines)
    ok, detail, _ = (True, "", 0.0) if own_rule else compare(task, out, ref, dtype)
    score.max_abs_error, score.max_rel_error = _errors(out, ref)
    if not ok:
        score.correct, score.detail = False, detail
        return score
    del out
    cand: Timing = measure(raw, args, device)
    last = _as_output(cand.last)
    if not own_rule and not compare(task, last, ref, dtype)[0]:
        score.correct, score.detail = False, "the timed calls returned wrong results"
        return score
    del last
    cand.last = None
    score.ms, score.reps, score.timer = cand.ms, cand.reps, cand.timer
    score.throughput, score.tflops, score.gbps = throughput(task, w, dtype, cand.ms)
    score.score = score.throughput
    limit = session.ceilings.for_unit(task.unit)
    score.limit_fraction = score.throughput / limit if limit else None
    if task.unit == GBPS and device.type == "cuda" and score.throughput > 0:
        score.copy_fraction = score.throughput / session.copy_gbps(w, task.bytes_moved(w, dtype))
    score.set_baselines(session.baseline_scores(w, args, ref, score.notes))
    for name, reason in session.missing.items():
        score.notes.append(f"baseline {name} missing: {reason}")
    return score


def benchmark(
    task: Task,
    checked: KernelFn,
    raw: KernelFn,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    workloads: list[Workload] | None = None,
    session: BenchSession | None = None,
    on_score: Callable[[WorkloadScore], None] | None = None,
    host_lines_of: Path | None = None,
) -> list[WorkloadScore]:
    """The score vector of a candidate that passed the gate (its kernel already loaded and guarded).

    ``host_lines_of``: record which lines of this file (the candidate's) each workload runs.
    """
    chosen = task.bench_workloads(device) if workloads is None else workloads
    scores = []
    for w in chosen:
        progress.stage(f"bench:{w.name}")
        s = score_workload(task, checked, raw, w, device, dtype, seed, session, host_lines_of)
        scores.append(s)
        if on_score is not None:
            on_score(s)
    # The cached blocks go back to the device once the task's workloads are done, not between them:
    # the first implementation timed after a large free (GBs of the previous workload's inputs) ran
    # up to 17 % slower on an H100 while the same code timed next did not, so freeing between
    # workloads put a penalty on whatever was timed first, the candidate. The allocator reuses its
    # cached blocks for the next inputs (and frees them itself before it would run out).
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return scores
