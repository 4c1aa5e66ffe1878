"""Where evaluations run: the local worker pool or a Ray cluster, N of them in flight.

An executor owns N sandboxed workers (:mod:`nodice.evaluation.workers`) and
runs a job on whichever is free. :meth:`Executor.run` is safe to call from N
threads at once; it blocks while every worker is busy. ``local`` keeps the
workers on this machine (one GPU each when there are several); ``ray``
(:mod:`nodice.evaluation.ray_executor`) keeps each on a Ray node with a free
GPU (or CPU), where it starts the same sandboxed worker process.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodice.errors import NodiceError
from nodice.evaluation.limits import Limits
from nodice.evaluation.workers import JobOutcome, Worker, make_worker

if TYPE_CHECKING:
    from nodice.evaluation.request import EvaluationRequest

EXECUTORS = ("local", "ray")


class ExecutorError(NodiceError):
    kind = "executor unavailable"


@dataclass(frozen=True)
class ExecutorConfig:
    """How evaluations are spread: ``kind`` local or ray, ``workers`` in flight, the Ray cluster's address."""

    kind: str = "local"
    workers: int = 1
    ray_address: str | None = None

    def validate(self) -> ExecutorConfig:
        if self.kind not in EXECUTORS:
            raise ExecutorError(f"executor must be one of {', '.join(EXECUTORS)}, not {self.kind!r}")
        if self.workers < 1:
            raise ExecutorError(f"--workers must be at least 1, not {self.workers}")
        if self.ray_address and self.kind != "ray":
            raise ExecutorError("--ray-address only applies with --executor ray")
        return self


def local_gpus() -> list[str]:
    """The GPUs this machine's workers may use, as ``CUDA_VISIBLE_DEVICES`` entries (no torch import)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU ")]


class Executor(ABC):
    """Runs evaluation jobs on ``workers`` sandboxed workers; never raises for a bad candidate."""

    workers: int = 1
    kind: str = ""

    @abstractmethod
    def run(self, job: EvaluationRequest) -> JobOutcome:
        """Run one job on a free worker (blocks until one is free); thread-safe."""

    @abstractmethod
    def close(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """For the record: which executor, how many workers."""
        return {"executor": self.kind, "workers": self.workers}


class LocalExecutor(Executor):
    """N workers on this machine; with several GPUs and a GPU device, worker i sees only GPU i mod n."""

    kind = "local"

    def __init__(self, isolation: str, device: str | None, limits: Limits, workers: int = 1):
        self.workers = workers
        gpus = local_gpus() if workers > 1 and device != "cpu" else []
        self._all: list[Worker] = []
        self._free: queue.Queue[Worker] = queue.Queue()
        for i in range(workers):
            env = {"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if len(gpus) > 1 else None
            worker = make_worker(isolation, device, limits, env)
            self._all.append(worker)
            self._free.put(worker)

    @property
    def device(self) -> str:
        return next((w.device for w in self._all if w.device), "")

    def run(self, job: EvaluationRequest) -> JobOutcome:
        worker = self._free.get()
        try:
            outcome = worker.run(job)
            outcome.device = outcome.device or worker.device
            outcome.environment = outcome.environment or dict(worker.environment)
            return outcome
        finally:
            self._free.put(worker)

    def close(self) -> None:
        for worker in self._all:
            worker.close()
