"""Warm-up: a kernel benchmark's compiles, JIT builds and BI audits, side by side, before any timing.

Library kernels are built on first use. A Triton autotuner compiles every
configuration of every kernel for each new set of compile-time constants
(fla's chunked gated delta rule: about 45 kernels per head configuration and
dtype); FlashInfer builds its CUDA modules with nvcc; flash-attn-4 compiles its
CuTe DSL kernels. None of that is part of a score, but done one task after
another it was most of a full benchmark's wall time on the H200 (sampling
150 s, gdn 181 s of 609 s), and it runs on one CPU core at a time.

So ``nodice bench kernels`` runs in two phases. First this one: a pool of
worker processes runs, side by side,

- per baseline and dtype it is audited in, one job: its BI audit in that dtype
  (:func:`nodice.measuring.baselines.audit.audit_dtype`), then, in the task's own
  dtype, one untimed call on every workload's inputs (the same tensors the
  benchmark draws, no reference). One process walks a baseline's workloads in
  order, as the measuring phase will, so a library compiles each kernel once
  (jobs of one library side by side would each compile the same kernels);
- the gate on every task's kernel (an isolated evaluation, no benchmark);

which fills the compile caches on disk that every process of the run shares
(Triton's cache, FlashInfer's JIT folder, flash-attn-4's CuTe DSL cache, which
:func:`cache_environment` switches on). Then the measuring phase runs the
tasks one after another on an otherwise idle GPU, as before, and is handed
the audits' verdicts. Only compiled code crosses from this phase to the next:
autotuners choose their configurations again there, on the idle GPU, never
from timings taken while other jobs shared it.

A job that fails, crashes its worker or runs out of time costs nothing but
time: its worker is replaced, and the measuring phase compiles (or audits)
what it did not.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

JobKind = Literal["gate", "baseline"]
# What a job's result says: "ok" (done), "missing" (the baseline does not load here), "failed"
# (an exception, in one line), "crashed" (the worker died), "timeout" (the worker was killed).
STATUSES = ("ok", "missing", "failed", "crashed", "timeout")
# How long a worker may take to import torch and start, before its first job's time starts.
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class WarmJob:
    kind: JobKind
    task: str
    # The baseline's name ("baseline") or the kernel's path ("gate").
    target: str
    # A baseline job: the dtype of its audit (a probe dtype the library may reject), then the
    # workloads it calls once each (in the task's dtype; none for a probe dtype).
    dtype: str = ""
    probe: bool = False
    workloads: tuple[str, ...] = ()

    def label(self) -> str:
        if self.kind == "gate":
            return f"{self.task}: gate · {Path(self.target).name}"
        calls = f" + {len(self.workloads)} calls" if self.workloads else ""
        return f"{self.task}: {self.target} · audit {self.dtype}{calls}"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WarmJob:
        return cls(**{**d, "workloads": tuple(d.get("workloads") or ())})


@dataclass
class WarmResult:
    job: WarmJob
    status: str
    seconds: float
    detail: str = ""
    # A baseline job's DtypeAudit (as a dict).
    audit: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job.label(), "status": self.status, "s": round(self.seconds, 1)}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class WarmReport:
    results: list[WarmResult] = field(default_factory=list)
    seconds: float = 0.0
    workers: int = 0
    device_type: str = "cpu"

    def audits(self, task: str, dtypes: list[str]) -> dict[str, dict[str, Any]]:
        """Baseline name → {verdict, detail, s} for every baseline of ``task`` audited in all ``dtypes``."""
        from nodice.measuring.baselines.audit import DtypeAudit, combine_audits

        by_name: dict[str, dict[str, DtypeAudit]] = {}
        seconds: dict[str, float] = {}
        for r in self.results:
            if r.job.task != task or r.job.kind != "baseline" or r.status != "ok" or r.audit is None:
                continue
            by_name.setdefault(r.job.target, {})[r.job.dtype] = DtypeAudit.from_dict(r.audit)
            seconds[r.job.target] = seconds.get(r.job.target, 0.0) + r.seconds
        out: dict[str, dict[str, Any]] = {}
        for name, parts in by_name.items():
            if not all(d in parts for d in dtypes):
                continue  # a dtype's job did not finish: the measuring phase audits this baseline itself
            combined = combine_audits([parts[d] for d in dtypes], self.device_type)
            if combined.verdict in ("pass", "bi_violation"):
                s = round(seconds[name], 2)
                out[name] = {"verdict": combined.verdict, "detail": combined.detail, "s": s}
        return out

    def summary(self) -> dict[str, Any]:
        """What the benchmark report keeps of this phase: its time, its jobs, the ones that did not finish."""
        counts = {s: sum(r.status == s for r in self.results) for s in STATUSES}
        slowest = sorted(self.results, key=lambda r: -r.seconds)[:5]
        return {
            "s": round(self.seconds, 1),
            "workers": self.workers,
            "jobs": len(self.results),
            "statuses": {k: v for k, v in counts.items() if v},
            "slowest": [r.to_dict() for r in slowest],
            "not_done": [r.to_dict() for r in self.results if r.status in ("failed", "crashed", "timeout")],
        }


def cache_environment() -> None:
    """Switch on the on-disk compile caches the two phases share (what is already set is kept)."""
    os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")


def plan(
    tasks: Iterable[str],
    kernels: dict[str, Path],
    device: Any,
    workloads: dict[str, list[str]] | None = None,
) -> list[WarmJob]:
    """Every job of the warm-up, longest first: each baseline's audit with its workload calls (tasks
    interleaved), then the audits in probe dtypes, then the gates."""
    from nodice.measuring.baselines import baselines_for
    from nodice.measuring.baselines.audit import audit_dtypes, dtype_name
    from nodice.tasks import get_task

    main: list[list[WarmJob]] = []
    probes: list[WarmJob] = []
    gates: list[WarmJob] = []
    for name in tasks:
        task = get_task(name)
        dtypes = audit_dtypes(task, device)
        chosen = tuple((workloads or {}).get(name) or [w.name for w in task.bench_workloads(device)])
        gates.append(WarmJob("gate", name, str(kernels[name])))
        own: list[WarmJob] = []
        for b in baselines_for(name, device):
            own.append(WarmJob("baseline", name, b.name, dtype=dtype_name(dtypes[0]), workloads=chosen))
            probes.extend(
                WarmJob("baseline", name, b.name, dtype=dtype_name(d), probe=True) for d in dtypes[1:]
            )
        main.append(own)
    interleaved = [job for group in _round_robin(main) for job in group]
    return [*interleaved, *probes, *gates]


def _round_robin(groups: list[list[WarmJob]]) -> Iterable[list[WarmJob]]:
    longest = max((len(g) for g in groups), default=0)
    for i in range(longest):
        yield [g[i] for g in groups if i < len(g)]


# ---------------------------------------------------------------------------------------------------
# In the worker process.


class _Baselines:
    """The worker's loaded baselines, per task (a library is imported once per worker)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.loaded: dict[str, tuple[dict[str, Any], dict[str, str]]] = {}

    def get(self, task: str, name: str) -> tuple[Any, str]:
        from nodice.measuring.baselines import load_baselines

        if task not in self.loaded:
            self.loaded[task] = load_baselines(task, self.device)
        impls, missing = self.loaded[task]
        if name in impls:
            return impls[name], ""
        return None, missing.get(name, f"no baseline {name!r} for {task}")


def _one_line(exc: BaseException) -> str:
    from nodice.errors import NodiceError

    if isinstance(exc, NodiceError):
        return exc.line()
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def run_job(
    job: WarmJob, device: Any, seed: int, baselines: _Baselines, gate_timeout_s: float
) -> dict[str, Any]:
    """One job in this process; returns its result fields (status, detail, audit)."""
    import torch

    from nodice.tasks import get_task

    task = get_task(job.task)
    if job.kind == "gate":
        from nodice.evaluation import Evaluator

        with Evaluator(device=device.type, isolation="isolated", timeout_s=gate_timeout_s) as ev:
            e = ev.evaluate(Path(job.target), job.task, bench=False, seed=seed)
        detail = e.check.reason or e.check.error or ""
        # The gate only fills the compile caches here: its verdict is the measuring phase's to give.
        return {"status": "ok" if e.verdict != "error" else "failed", "detail": detail}
    impl, reason = baselines.get(job.task, job.target)
    if impl is None:
        return {"status": "missing", "detail": reason}
    from nodice.measuring.baselines.audit import audit_dtype
    from nodice.measuring.throughput import timed_call, workload_args

    part = audit_dtype(task, impl, device, getattr(torch, job.dtype), seed, name=job.target, probe=job.probe)
    known = {w.name: w for w in task.bench_workloads(device)}
    failed: list[str] = []
    for name in job.workloads:
        if name not in known:
            failed.append(f"{name}: no such workload")
            continue
        args = workload_args(task, known[name], device, task.dtype_for(device), seed)
        try:
            timed_call(impl, args)()
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # the measuring phase meets the same failure and reports it
            failed.append(f"{name}: {_one_line(exc)}")
        finally:
            del args
            if device.type == "cuda":
                torch.cuda.empty_cache()
    detail = f"calls failed: {'; '.join(failed)}"[:600] if failed else ""
    return {"status": "ok", "audit": part.to_dict(), "detail": detail}


def worker_main(device_name: str, seed: int, gate_timeout_s: float) -> None:
    """Jobs as JSON lines on stdin, results as JSON lines on the original stdout.

    What the libraries print (compile logs, warnings) goes to stderr, never into the results."""
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch

    # Workers run side by side: each takes its share of the cores for torch's own CPU work (drawing inputs).
    torch.set_num_threads(max(1, int(os.environ.get("NODICE_WARM_THREADS", "2"))))
    device = torch.device(device_name)
    baselines = _Baselines(device)
    results.write(json.dumps({"ready": True}) + "\n")  # a job's time starts after the imports
    for line in sys.stdin:
        if not line.strip():
            continue
        job = WarmJob.from_dict(json.loads(line))
        t0 = time.perf_counter()
        try:
            out = run_job(job, device, seed, baselines, gate_timeout_s)
        except BaseException as exc:  # a library's failure is this job's result, not the worker's end
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            out = {"status": "failed", "detail": _one_line(exc)}
        out["s"] = time.perf_counter() - t0
        results.write(json.dumps(out) + "\n")


# ---------------------------------------------------------------------------------------------------
# In the benchmark's process.


class _Worker:
    """One worker process and the thread that reads its results."""

    def __init__(self, device: str, seed: int, gate_timeout_s: float, log_dir: Path) -> None:
        self.stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the worker
            "w+b", dir=log_dir, prefix="warm-worker-", suffix=".log", delete=False
        )
        cmd = [sys.executable, "-m", "nodice.bench.warm", "--device", device, "--seed", str(seed),
               "--gate-timeout", str(gate_timeout_s)]  # fmt: skip
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ready = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, job: WarmJob, timeout_s: float) -> tuple[str, dict[str, Any]]:
        """("ok", result) or ("crashed" | "timeout", {"detail": ...}); the worker is unusable after either."""
        assert self.proc.stdin is not None
        if not self.ready:
            try:
                first = self.lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.kill()
                return "timeout", {"detail": f"the worker did not start in {START_TIMEOUT_S:.0f} s"}
            if first is None:
                self.kill()
                return "crashed", {"detail": self.last_words()}
            self.ready = True
        try:
            self.proc.stdin.write(json.dumps(asdict(job)) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            return "timeout", {"detail": f"no result after {timeout_s:.0f} s; the worker was killed"}
        except (BrokenPipeError, OSError):
            line = None
        if line is None:
            self.kill()
            return "crashed", {"detail": self.last_words()}
        return "ok", json.loads(line)

    def last_words(self) -> str:
        self.stderr.flush()
        try:
            tail = Path(self.stderr.name).read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError:
            tail = ""
        lines = [ln for ln in tail.splitlines() if ln.strip()]
        code = self.proc.poll()
        return f"the worker exited ({code})" + (f": {lines[-1].strip()[:240]}" if lines else "")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()
        Path(self.stderr.name).unlink(missing_ok=True)


def default_workers(device: str) -> int:
    """Side-by-side workers: compiles are single-threaded, so about one per core, at most 8 on a GPU."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8 if device == "cuda" else 2, cores))


def warm_up(
    jobs: list[WarmJob],
    device: str,
    *,
    seed: int = 0,
    workers: int | None = None,
    job_timeout_s: float = 600.0,
    on_result: Callable[[WarmResult], None] | None = None,
) -> WarmReport:
    """Run ``jobs`` on a pool of ``workers`` processes; every job gets a result, whatever happens to it."""
    n = max(1, min(workers or default_workers(device), len(jobs) or 1))
    report = WarmReport(workers=n, device_type=device)
    pending: queue.Queue[WarmJob] = queue.Queue()
    for job in jobs:
        pending.put(job)
    lock = threading.Lock()
    log_dir = Path(tempfile.mkdtemp(prefix="nodice-warm-"))
    gate_timeout_s = max(30.0, job_timeout_s - 30.0)

    def slot() -> None:
        worker: _Worker | None = None
        try:
            while True:
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                if worker is None:
                    worker = _Worker(device, seed, gate_timeout_s, log_dir)
                t0 = time.perf_counter()
                how, out = worker.run(job, job_timeout_s)
                if how != "ok":
                    worker.close()
                    worker = None
                    out["status"] = how
                seconds = float(out.get("s", time.perf_counter() - t0))
                result = WarmResult(
                    job,
                    str(out.get("status", "failed")),
                    seconds,
                    str(out.get("detail", "")),
                    out.get("audit"),
                )
                with lock:
                    report.results.append(result)
                    if on_result is not None:
                        on_result(result)
        finally:
            if worker is not None:
                worker.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=slot, name=f"warm-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report.seconds = time.perf_counter() - t0
    with contextlib.suppress(OSError):
        log_dir.rmdir()
    return report


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m nodice.bench.warm", description="a warm-up worker")
    parser.add_argument("--device", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gate-timeout", type=float, default=570.0)
    args = parser.parse_args(argv)
    worker_main(args.device, args.seed, args.gate_timeout)


if __name__ == "__main__":
    main()
