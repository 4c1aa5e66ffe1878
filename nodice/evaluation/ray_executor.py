"""Evaluations on a Ray cluster: each worker slot is a Ray actor holding one GPU (or CPU) on some node.

The actor does not run the candidate: it starts the same sandboxed worker
process as a local evaluation (:mod:`nodice.evaluation.workers`: a fresh
interpreter, clean environment, time and memory limits) on its node, and hands
it each job. The candidate's folder travels with the job (nodes share no
files with the driver) and is unpacked in a temporary folder on the node;
results come back to the driver, which records them in its one store.

A lost actor (its node died, its process was killed, the cluster dropped it)
costs the job in flight: it is retried once on a fresh actor
(:class:`nodice.evaluation.ray_slots.RaySlots`), and if that is lost too the
evaluation is an ``error``, never the run.
Needs ``pip install 'nodice[ray]'``; nodice must be installed on every node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nodice.evaluation.executor import Executor
from nodice.evaluation.limits import Limits
from nodice.evaluation.ray_slots import RaySlots
from nodice.evaluation.request import EvaluationRequest
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


def bundle_files(path: str, contracts: Iterable[str]) -> dict[str, Any]:
    """What travels to a node beside a job: its candidate's folder and its contract files."""
    candidate = Path(path)
    folder = pack_folder(candidate.parent) if candidate.is_file() else None
    files = {}
    for c in contracts:
        with contextlib.suppress(OSError):  # the worker reports a missing contract
            files[c] = Path(c).read_bytes()
    return {"folder": folder, "contracts": files}


def unpack_files(bundle: dict[str, Any], scratch: Path, path: str) -> tuple[str, list[str] | None, str]:
    """The bundle's files written under ``scratch``: the candidate's new path, the contracts' new
    paths (None when none travelled) and the original folder (for the log)."""
    original = str(Path(path).parent)
    if bundle.get("folder") is not None:
        for rel, data in bundle["folder"].items():
            target = scratch / "candidate" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        path = str(scratch / "candidate" / Path(path).name)
    moved = []
    for i, (name, data) in enumerate((bundle.get("contracts") or {}).items()):
        target = scratch / "contracts" / f"{i}_{Path(name).name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        moved.append(str(target))
    return path, moved or None, original


def bundle_request(request: EvaluationRequest) -> dict[str, Any]:
    return {"request": request, **bundle_files(request.path, request.contracts)}


def unpack_request(bundle: dict[str, Any], scratch: Path) -> tuple[EvaluationRequest, str]:
    """The request with its files moved under ``scratch``, and the original folder (for the log)."""
    request: EvaluationRequest = bundle["request"]
    path, contracts, original = unpack_files(bundle, scratch, request.path)
    return request.moved(path, request.contracts if contracts is None else contracts), original


class NodeWorker:
    """The body of a Ray actor: one sandboxed worker on this node, fed the jobs sent to the actor."""

    def __init__(self, isolation: str, device: str | None, timeout_s: float | None, memory_mb: int | None):
        self.worker: Worker = make_worker(isolation, device, Limits(timeout_s, memory_mb))

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    def run(self, bundle: dict[str, Any]) -> dict[str, Any]:
        scratch = Path(tempfile.mkdtemp(prefix="nodice-ray-"))
        try:
            request, original = unpack_request(bundle, scratch)
            outcome = self.worker.run(request)
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


class RayExecutor(Executor):
    """``workers`` sandboxed workers on the Ray cluster at ``address`` (see :class:`RaySlots`)."""

    kind = "ray"

    def __init__(
        self,
        isolation: str,
        device: str | None,
        limits: Limits,
        workers: int = 1,
        address: str | None = None,
    ):
        args = (isolation, device, limits.timeout_s, limits.memory_mb)
        self.slots = RaySlots(NodeWorker, args, device, workers, address)
        self.device = self.slots.device
        self.workers = self.slots.workers

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "requested": self.slots.requested, "lost": self.slots.lost}

    def run(self, job: EvaluationRequest) -> JobOutcome:
        reply, lost = self.slots.call("run", bundle_request(job))
        if reply is None:
            return JobOutcome(None, f"worker failed twice on the Ray cluster: {lost[-1]}")
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

    def close(self) -> None:
        self.slots.close()
