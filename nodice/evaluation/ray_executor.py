"""Evaluations on a Ray cluster: each worker slot is a Ray actor holding one GPU (or CPU) on some node.

The actor does not run the candidate: it starts the same sandboxed worker
process as a local evaluation (:mod:`nodice.evaluation.workers`: a fresh
interpreter, clean environment, time and memory limits) on its node, and hands
it each job. The candidate's folder travels with the job (nodes share no
files with the driver) and is unpacked in a temporary folder on the node;
results come back to the driver, which records them in its one store.

A lost actor (its node died, its process was killed, the cluster dropped it)
costs the job in flight: it is retried once on a fresh actor, and if that is
lost too the evaluation is an ``error``, never the run.
Needs ``pip install 'nodice[ray]'``; nodice must be installed on every node.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from nodice.evaluation.executor import Executor, ExecutorError
from nodice.evaluation.limits import Limits
from nodice.evaluation.workers import JobOutcome, Worker, make_worker

# What a candidate's folder may weigh to travel with its job; beyond it the job keeps its paths
# (a cluster whose nodes share the filesystem still works).
MAX_BUNDLE_FILES = 256
MAX_BUNDLE_BYTES = 32 << 20
_SKIPPED = {"__pycache__", ".git"}


def pack_folder(folder: Path) -> dict[str, bytes] | None:
    """The files under ``folder`` by relative path, or None when there are too many or too large."""
    files: dict[str, bytes] = {}
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIPPED and not d.startswith(".")]
        for name in names:
            path = Path(root) / name
            if not path.is_file() or path.is_symlink():
                continue
            total += path.stat().st_size
            if len(files) >= MAX_BUNDLE_FILES or total > MAX_BUNDLE_BYTES:
                return None
            files[str(path.relative_to(folder))] = path.read_bytes()
    return files


def bundle_job(job: dict[str, Any]) -> dict[str, Any]:
    """What travels to the node: the job, its candidate's folder and its contract files."""
    path = Path(job["path"])
    folder = pack_folder(path.parent) if path.is_file() else None
    contracts = {}
    for c in job.get("contracts") or []:
        with contextlib.suppress(OSError):  # the worker reports a missing contract
            contracts[c] = Path(c).read_bytes()
    return {"job": job, "folder": folder, "contracts": contracts}


def _unpack(bundle: dict[str, Any], scratch: Path) -> tuple[dict[str, Any], str]:
    """The job with its paths moved under ``scratch``, and the original folder (for the log)."""
    job = dict(bundle["job"])
    original = str(Path(job["path"]).parent)
    if bundle.get("folder") is not None:
        for rel, data in bundle["folder"].items():
            target = scratch / "candidate" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        job["path"] = str(scratch / "candidate" / Path(job["path"]).name)
    moved = []
    for i, (name, data) in enumerate((bundle.get("contracts") or {}).items()):
        target = scratch / "contracts" / f"{i}_{Path(name).name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        moved.append(str(target))
    if moved:
        job["contracts"] = moved
    return job, original


class NodeWorker:
    """The body of a Ray actor: one sandboxed worker on this node, fed the jobs sent to the actor."""

    def __init__(self, isolation: str, device: str | None, timeout_s: float | None, memory_mb: int | None):
        self.worker: Worker = make_worker(isolation, device, Limits(timeout_s, memory_mb))

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def run(self, bundle: dict[str, Any]) -> dict[str, Any]:
        scratch = Path(tempfile.mkdtemp(prefix="nodice-ray-"))
        try:
            job, original = _unpack(bundle, scratch)
            outcome = self.worker.run(job)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        # The candidate's frames in a hung worker's stacks name its files where the driver has them.
        log = outcome.log.replace(str(scratch / "candidate"), original)
        return {
            "payload": outcome.payload,
            "failure": outcome.failure,
            "log": log,
            "timings": outcome.timings,
            "device": self.worker.device,
            "environment": {**self.worker.environment, "ray_node": socket.gethostname()},
        }

    def close(self) -> None:
        self.worker.close()


def _reachable(address: str) -> bool:
    """False when nothing listens at a ``host:port`` address (Ray itself would wait minutes to say so)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return True  # "auto", a name Ray resolves itself: let it try
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            return True
    except OSError:
        return False


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'nodice[ray]'") from None
    return ray


class RayExecutor(Executor):
    """``workers`` actors on the cluster at ``address``.

    Without an address: ``RAY_ADDRESS``, else a cluster started on this machine, else a new local one.
    """

    kind = "ray"

    def __init__(
        self,
        isolation: str,
        device: str | None,
        limits: Limits,
        workers: int = 1,
        address: str | None = None,
    ):
        ray = self.ray = _import_ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address and not _reachable(address):
                raise ExecutorError(f"cannot reach a Ray cluster at {address}: nothing listens there")
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean "no cluster"
                where = address or "the default address"
                raise ExecutorError(f"cannot reach a Ray cluster at {where}: {exc}") from None
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if device is None:
            device = "cuda" if gpus else "cpu"
        resource = "GPU" if device == "cuda" else "CPU"
        available = int(resources.get(resource, 0))
        if available < 1:
            self.close()
            raise ExecutorError(f"the Ray cluster has no {resource} for a {device} evaluation")
        self.requested = workers
        self.workers = min(workers, available)  # more actors than slots would wait forever
        options: dict[str, Any] = {"num_cpus": 1, "max_concurrency": 1}
        if device == "cuda":
            options["num_gpus"] = 1
        self._actor_class = ray.remote(**options)(NodeWorker)
        self._args = (isolation, device, limits.timeout_s, limits.memory_mb)
        self._free: queue.Queue[int] = queue.Queue()
        self._actors: dict[int, Any] = {}
        self.device = device
        self.lost = 0  # actors lost with a job in flight
        for slot in range(self.workers):
            self._free.put(slot)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "requested": self.requested, "lost": self.lost}

    def _actor(self, slot: int) -> Any:
        if slot not in self._actors:
            self._actors[slot] = self._actor_class.remote(*self._args)
        return self._actors[slot]

    def _replace(self, slot: int) -> None:
        actor = self._actors.pop(slot, None)
        if actor is not None:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor)

    def where(self, slot: int) -> dict[str, Any]:
        """The process id and host of a slot's actor (starting it if needed)."""
        return dict(self.ray.get(self._actor(slot).where.remote()))

    def run(self, job: dict[str, Any]) -> JobOutcome:
        bundle = bundle_job(job)
        slot = self._free.get()
        lost: list[str] = []
        try:
            while len(lost) < 2:
                try:
                    reply = self.ray.get(self._actor(slot).run.remote(bundle))
                except self.ray.exceptions.RayError as exc:
                    self.lost += 1
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    lost.append(f"{type(exc).__name__}: {first[:200]}")
                    self._replace(slot)
                    continue
                outcome = JobOutcome(
                    reply["payload"],
                    reply["failure"],
                    reply["log"],
                    dict(reply["timings"]),
                    reply["device"],
                    dict(reply["environment"]),
                )
                if lost:
                    outcome.timings["ray_retries"] = len(lost)
                    outcome.log = f"[nodice] Ray worker lost, evaluation retried: {lost[0]}\n" + outcome.log
                return outcome
            return JobOutcome(None, f"worker failed twice on the Ray cluster: {lost[-1]}")
        finally:
            self._free.put(slot)

    def close(self) -> None:
        for slot in list(self._actors):
            with contextlib.suppress(Exception):  # a lost actor has nothing to close
                self.ray.get(self._actors[slot].close.remote(), timeout=30)
            self._replace(slot)
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
