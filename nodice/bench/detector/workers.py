"""Run many isolated jobs on a few long-lived spawned worker processes.

Starting a process that imports torch and Triton costs seconds, so a worker
serves job after job; a job that hangs or kills its worker costs that job
(reported as an error) and a fresh worker, never the whole benchmark.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


@dataclass
class JobOutcome:
    key: str
    result: Any | None
    error: str | None
    seconds: float


def gpu_count(device: str) -> int:
    """GPUs to spread workers over (0 on CPU)."""
    if device != "cuda":
        return 0
    import torch

    return torch.cuda.device_count()


def _resolve(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def _serve(conn: Connection, target: str, env: dict[str, str]) -> None:
    # Before the target's imports: e.g. CUDA_VISIBLE_DEVICES must be set before torch starts CUDA.
    os.environ.update(env)
    fn = _resolve(target)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        key, kwargs = msg
        try:
            conn.send((key, fn(**kwargs), None))
        except Exception as exc:
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            conn.send((key, None, f"{type(exc).__name__}: {line}"[:400]))


class _Worker:
    def __init__(self, ctx: Any, target: str, env: dict[str, str]):
        self.env = env
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, target, env), daemon=True)
        self.proc.start()
        child.close()
        self.job: tuple[str, float] | None = None  # (key, start time)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                self.proc.kill()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


def run_jobs(
    target: str,
    jobs: list[tuple[str, dict[str, Any]]],
    processes: int = 1,
    timeout_s: float = 900.0,
    on_done: Callable[[JobOutcome], None] | None = None,
    gpus: int = 0,
) -> list[JobOutcome]:
    """Call ``module:function`` with each job's keyword arguments in a worker; outcomes in job order.

    With ``gpus`` > 0, worker ``i`` sees only GPU ``i % gpus``, so that concurrent workers do not
    share a device (and its timings).
    """
    ctx = mp.get_context("spawn")
    pending = list(reversed(jobs))
    outcomes: dict[str, JobOutcome] = {}

    def env(i: int) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": str(i % gpus)} if gpus > 0 else {}

    workers = [_Worker(ctx, target, env(i)) for i in range(max(1, min(processes, len(jobs))))]

    def finish(w: _Worker, result: Any, error: str | None) -> None:
        assert w.job is not None
        key, start = w.job
        outcome = JobOutcome(key, result, error, round(time.perf_counter() - start, 2))
        outcomes[key] = outcome
        w.job = None
        if on_done is not None:
            on_done(outcome)

    try:
        while pending or any(w.job for w in workers):
            for w in workers:
                if w.job is None and pending:
                    key, kwargs = pending.pop()
                    w.job = (key, time.perf_counter())
                    w.conn.send((key, kwargs))
            busy = [w for w in workers if w.job is not None]
            deadline = min(w.job[1] for w in busy if w.job) + timeout_s
            ready = wait([w.conn for w in busy], timeout=max(0.0, deadline - time.perf_counter()))
            for i, w in enumerate(workers):
                if w.job is None:
                    continue
                if w.conn in ready:
                    try:
                        _, result, error = w.conn.recv()
                    except (EOFError, OSError):
                        finish(w, None, f"worker died (exit code {w.proc.exitcode})")
                    else:
                        # Outside the try: what on_done raises (a labels file it cannot write) is the
                        # caller's error, not this worker's death.
                        finish(w, result, error)
                        continue
                elif time.perf_counter() - w.job[1] >= timeout_s:
                    finish(w, None, f"timed out after {timeout_s:.0f} s")
                else:
                    continue
                w.stop(kill=True)
                workers[i] = _Worker(ctx, target, w.env)
    finally:
        for w in workers:
            w.stop(kill=w.job is not None)
    return [outcomes[key] for key, _ in jobs]
