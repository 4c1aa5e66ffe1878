"""Slots on a Ray cluster: N actors of one class, each holding a GPU (or a CPU), one call at a time.

A call blocks until a slot is free. A slot whose actor is lost mid-call (its
node died, its process was killed, the cluster dropped it) gets a fresh actor
and the call is retried once; a second loss is reported to the caller, which
turns it into one failed job, never a failed run. Used by the evaluation
executor and by the benchmarks that spread their candidates over a cluster.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
from typing import Any

from nodice.evaluation.executor import ExecutorError


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'nodice[ray]'") from None
    return ray


def reachable(address: str) -> bool:
    """False when nothing listens at a ``host:port`` address (Ray itself would wait minutes to say so)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return True  # "auto", a name Ray resolves itself: let it try
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            return True
    except OSError:
        return False


class RaySlots:
    """``workers`` actors of ``body`` (a plain class) for ``device`` on the cluster at ``address``.

    Without an address: ``RAY_ADDRESS``, else a cluster started on this machine, else a new local
    one. ``device`` None takes a GPU when the cluster has any. More slots than the cluster has GPUs
    (or CPUs) would wait forever, so ``workers`` is capped there (``requested`` keeps the ask).
    """

    # A new actor that gets no GPU (or CPU) in this time counts as lost: a node gone with its GPUs must
    # not leave a call waiting forever for a slot the cluster no longer has.
    start_timeout_s = 600.0

    def __init__(
        self, body: type, args: tuple[Any, ...], device: str | None, workers: int, address: str | None
    ):
        ray = self.ray = import_ray()
        self._actors: dict[int, Any] = {}
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address and not reachable(address):
                raise ExecutorError(f"cannot reach a Ray cluster at {address}: nothing listens there")
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean "no cluster"
                where = address or "the default address"
                raise ExecutorError(f"cannot reach a Ray cluster at {where}: {exc}") from None
        resources = ray.cluster_resources()
        if device is None:
            device = "cuda" if resources.get("GPU", 0) >= 1 else "cpu"
        resource = "GPU" if device == "cuda" else "CPU"
        available = int(resources.get(resource, 0))
        if available < 1:
            self.close()
            raise ExecutorError(f"the Ray cluster has no {resource} for a {device} evaluation")
        self.device = device
        self.requested = workers
        self.workers = min(workers, available)
        options: dict[str, Any] = {"num_cpus": 1, "max_concurrency": 1}
        if device == "cuda":
            options["num_gpus"] = 1
        self._actor_class = ray.remote(**options)(body)
        self._args = args
        self._free: queue.Queue[int] = queue.Queue()
        self.lost = 0  # actors lost with a call in flight
        for slot in range(self.workers):
            self._free.put(slot)

    def _actor(self, slot: int) -> Any:
        if slot not in self._actors:
            actor = self._actors[slot] = self._actor_class.remote(*self._args)
            # Placed and constructed, or GetTimeoutError (a RayError: the caller counts it as a loss).
            self.ray.get(actor.__ray_ready__.remote(), timeout=self.start_timeout_s)
        return self._actors[slot]

    def _replace(self, slot: int) -> None:
        actor = self._actors.pop(slot, None)
        if actor is not None:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor)

    def where(self, slot: int) -> dict[str, Any]:
        """What the slot's actor says of itself through its ``where`` method (starting it if needed)."""
        return dict(self.ray.get(self._actor(slot).where.remote()))

    def call(self, method: str, *args: Any) -> tuple[Any | None, list[str]]:
        """``method(*args)`` on a free slot's actor: its reply (None if lost twice) and the losses."""
        slot = self._free.get()
        lost: list[str] = []
        try:
            while len(lost) < 2:
                try:
                    actor = self._actor(slot)
                    return self.ray.get(getattr(actor, method).remote(*args)), lost
                except self.ray.exceptions.RayError as exc:
                    self.lost += 1
                    text = str(exc).strip()
                    first = text.splitlines()[0] if text else ""
                    lost.append(f"{type(exc).__name__}: {first[:200]}")
                    self._replace(slot)
            return None, lost
        finally:
            self._free.put(slot)

    def close(self, method: str | None = "close") -> None:
        """Ask every actor to release what it holds (``method``), then end them; leave Ray if we joined it."""
        for slot in list(self._actors):
            if method is not None:
                with contextlib.suppress(Exception):  # a lost actor has nothing to release
                    self.ray.get(getattr(self._actors[slot], method).remote(), timeout=30)
            self._replace(slot)
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
