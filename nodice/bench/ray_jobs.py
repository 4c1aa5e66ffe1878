"""Benchmark jobs spread over a Ray cluster, each in the benchmark's own worker process on its node.

Locally, :func:`nodice.bench.detector.workers.run_jobs` feeds jobs to a few
spawned worker processes. Here each Ray slot (one GPU, or one CPU) is an actor
that runs its job through the same function, in a spawned worker process on
its node, with the same time limit; the candidate's folder travels with the
job. A lost actor costs a retry of its job; a second loss is that job's error.

:func:`measure_on_cluster` measures a benchmark's ceilings and describes the
machine on one slot of the cluster, so every ``limit_fraction`` of a report
measured there divides by numbers of the cluster's device, not the driver's.
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
from typing import TYPE_CHECKING, Any

from nodice.bench.detector.workers import JobOutcome, run_jobs
from nodice.errors import NodiceError
from nodice.evaluation.ray_executor import bundle_files, unpack_files
from nodice.evaluation.ray_slots import RaySlots, import_ray

if TYPE_CHECKING:
    from nodice.measuring.ceilings import Ceilings

# A slot that cannot be placed in this time (the cluster's GPUs are gone) is an error, not a hang.
_MEASURE_TIMEOUT_S = 600.0


class ClusterMeasureError(NodiceError):
    kind = "kernel benchmark"


class NodeJobs:
    """The body of a Ray actor: runs ``target`` on each job in a spawned worker process on this node."""

    def __init__(self, target: str, timeout_s: float):
        self.target, self.timeout_s = target, timeout_s

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def run(self, key: str, bundle: dict[str, Any]) -> dict[str, Any]:
        scratch = Path(tempfile.mkdtemp(prefix="nodice-ray-"))
        try:
            job = dict(bundle["job"])
            job["path"], contracts, _ = unpack_files(bundle, scratch, job["path"])
            if contracts is not None:
                job["contracts"] = contracts
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
        bundle = {"job": kwargs, **bundle_files(kwargs["path"], kwargs.get("contracts") or [])}
        reply, lost = slots.call("run", key, bundle)
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


def _measure_here(device: str) -> tuple[dict[str, Any], str, dict[str, str]]:
    """On a node: its ceilings, its description and its versions."""
    import torch

    from nodice.measuring.ceilings import ceilings_for
    from nodice.measuring.provenance import environment, gpu_versions

    ceilings = ceilings_for(torch.device(device))
    machine, versions = environment(device)
    versions.update(gpu_versions())
    return ceilings.to_dict(), machine, versions


def measure_on_cluster(device: str) -> tuple[Ceilings, str, dict[str, str]]:
    """The ceilings, machine and versions of one slot (one GPU on cuda) of the joined cluster."""
    from nodice.measuring.ceilings import Ceilings

    ray = import_ray()
    options: dict[str, Any] = {"num_cpus": 1, **({"num_gpus": 1} if device == "cuda" else {})}
    task = ray.remote(**options)(_measure_here)
    try:
        measured, machine, versions = ray.get(task.remote(device), timeout=_MEASURE_TIMEOUT_S)
    except ray.exceptions.RayError as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ClusterMeasureError(
            f"measuring the ceilings on the Ray cluster failed: {first[:200]}"
        ) from None
    known = {k: v for k, v in measured.items() if k in Ceilings.__dataclass_fields__}
    return Ceilings(**known), machine, versions
