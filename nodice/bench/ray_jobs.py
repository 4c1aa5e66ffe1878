"""Benchmark jobs spread over a Ray cluster, each in the benchmark's own worker process on its node.

Locally, :func:`nodice.bench.detector.workers.run_jobs` feeds jobs to a few
spawned worker processes. Here each Ray slot (one GPU, or one CPU) is an actor
that runs its job through the same function, in a spawned worker process on
its node, with the same time limit; the candidate's folder travels with the
job. A lost actor costs a retry of its job; a second loss is that job's error.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nodice.bench.detector.workers import JobOutcome, run_jobs
from nodice.evaluation.ray_executor import bundle_job, unpack_job
from nodice.evaluation.ray_slots import RaySlots


class NodeJobs:
    """The body of a Ray actor: runs ``target`` on each job in a spawned worker process on this node."""

    def __init__(self, target: str, timeout_s: float):
        self.target, self.timeout_s = target, timeout_s

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def run(self, key: str, bundle: dict[str, Any]) -> dict[str, Any]:
        scratch = Path(tempfile.mkdtemp(prefix="nodice-ray-"))
        try:
            job, _ = unpack_job(bundle, scratch)
            return asdict(run_jobs(self.target, [(key, job)], 1, self.timeout_s)[0])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def run_jobs_ray(
    target: str,
    jobs: list[tuple[str, dict[str, Any]]],
    workers: int,
    timeout_s: float,
    on_done: Callable[[JobOutcome], None] | None,
    device: str,
    address: str | None = None,
) -> list[JobOutcome]:
    """:func:`run_jobs` on the cluster: ``workers`` jobs at a time; outcomes in job order."""
    slots = RaySlots(NodeJobs, (target, timeout_s), device, workers, address)
    lock = threading.Lock()

    def one(item: tuple[str, dict[str, Any]]) -> JobOutcome:
        key, kwargs = item
        t0 = time.perf_counter()
        reply, lost = slots.call("run", key, bundle_job(kwargs))
        if reply is None:
            why = f"worker failed twice on the Ray cluster: {lost[-1]}"
            outcome = JobOutcome(key, None, why, round(time.perf_counter() - t0, 2))
        else:
            outcome = JobOutcome(**reply)
        if on_done is not None:
            with lock:  # progress lines and files are written one job at a time
                on_done(outcome)
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=slots.workers) as pool:
            return list(pool.map(one, jobs))
    finally:
        slots.close(method=None)
