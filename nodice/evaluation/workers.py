"""Worker processes behind one interface: isolated (a fresh process per candidate) or persistent.

Both spawn a new interpreter (never a fork of the caller) with a clean
environment, talk to it over a private pipe, and enforce the wall-clock and
memory limits from the parent, which kills the whole process group on a breach.
The persistent worker keeps its process (and the libraries it imported) across
candidates and replaces it after any failure, any sign of tampering, a broken
CUDA context, or every ``max_jobs`` evaluations.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from nodice.errors import NodiceError
from nodice.evaluation.limits import Limits, clean_environment, resident_mb

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Importing torch and triton can be slow on a busy machine; this is not the candidate's time.
STARTUP_TIMEOUT_S = 300.0
POLL_S = 0.1
LOG_TAIL_BYTES = 4000


class WorkerStartError(NodiceError):
    kind = "worker failed to start"


@dataclass
class JobOutcome:
    """What came back from one job: the worker's payload, or why there is none."""

    payload: dict[str, Any] | None
    failure: str = ""
    log: str = ""
    timings: dict[str, float] = field(default_factory=dict)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class WorkerProcess:
    """One spawned worker interpreter and the pipe to it."""

    def __init__(self, device: str | None, limits: Limits, wait: bool = True):
        self.limits = limits
        log_fd, log_name = tempfile.mkstemp(prefix="nodice-worker-", suffix=".log")
        os.close(log_fd)
        self.log_path = Path(log_name)
        parent_sock, child_sock = socket.socketpair()
        self.conn = Connection(os.dup(parent_sock.fileno()))
        parent_sock.close()
        child_fd = os.dup(child_sock.fileno())
        child_sock.close()
        memory = "" if limits.memory_mb is None else str(limits.memory_mb)
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nodice.evaluation.worker_main", str(child_fd), device or "", memory],
                pass_fds=(child_fd,),
                env=clean_environment(PACKAGE_ROOT),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: one kill takes its children too
            )
        os.close(child_fd)
        self.jobs = 0
        self.started = t0
        self.ready = False
        self.device, self.memory_limit, self.import_ms, self.start_ms = "", "", 0.0, 0.0
        self.environment: dict[str, Any] = {}
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Block until the worker has imported its libraries (raises WorkerStartError if it cannot)."""
        if self.ready:
            return
        ready = self._wait(STARTUP_TIMEOUT_S)
        if ready.payload is None:
            tail = ready.log.strip().splitlines()[-1:] if ready.log.strip() else []
            self.kill()
            raise WorkerStartError(ready.failure + (f": {tail[0]}" if tail else ""))
        info = ready.payload
        self.device = info["device"]
        self.environment = info["environment"]
        self.memory_limit = info["memory_limit"]
        self.import_ms = info["import_ms"]
        self.start_ms = round((time.perf_counter() - self.started) * 1e3, 1)
        self.ready = True

    # ---- I/O with limits -------------------------------------------------------------
    def _log_from(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(offset, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def _wait(self, timeout_s: float, log_offset: int = 0) -> JobOutcome:
        """The next message from the worker, or why none came (death, timeout, memory)."""
        deadline = time.monotonic() + timeout_s
        limit_mb = self.limits.resident_mb
        while True:
            try:
                if self.conn.poll(POLL_S):
                    _, payload = self.conn.recv()
                    return JobOutcome(payload, log=self._log_from(log_offset))
            except (EOFError, OSError, ConnectionResetError):
                pass  # the worker is gone; its exit status says why
            if self.proc.poll() is not None:
                return JobOutcome(None, self._death(), self._log_from(log_offset))
            rss = resident_mb(self.proc.pid)
            if rss > limit_mb:
                self.kill()
                return JobOutcome(
                    None,
                    f"out of memory: {rss:.0f} MB resident, limit {limit_mb} MB",
                    self._log_from(log_offset),
                )
            if time.monotonic() > deadline:
                self._dump_stacks()
                self.kill()
                return JobOutcome(
                    None, f"timed out: no result after {timeout_s:.0f} s", self._log_from(log_offset)
                )

    def _dump_stacks(self) -> None:
        """Ask a hung worker for its Python stacks (faulthandler writes them to its log), briefly."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, signal.SIGUSR1)
            time.sleep(0.5)

    def _death(self) -> str:
        code = self.proc.returncode
        if code is not None and code < 0:
            name = _signal_name(code)
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"worker killed by {name}{hint}"
        return f"worker exited with status {code} before reporting"

    def run(self, job: dict[str, Any], timeout_s: float) -> JobOutcome:
        offset = self._log_size()
        try:
            self.conn.send(("job", job))
        except (OSError, BrokenPipeError):
            self.proc.wait(5)
            return JobOutcome(None, self._death(), self._log_from(offset))
        self.jobs += 1
        outcome = self._wait(timeout_s, offset)
        if outcome.payload is not None and outcome.payload.get("internal_error"):
            outcome = JobOutcome(None, outcome.payload["internal_error"], outcome.log)
        return outcome

    # ---- life cycle ------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # unkillable (D state): leave it
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send(("stop", None))
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.conn.close()
        self.log_path.unlink(missing_ok=True)


class Worker(ABC):
    """Runs evaluation jobs in a sandboxed process; never raises for a bad candidate."""

    def __init__(self, device: str | None, limits: Limits):
        self.requested_device = device
        self.limits = limits
        self.device: str = device or ""
        self.environment: dict[str, Any] = {}
        self.restarts = 0

    def _spawn(self) -> tuple[WorkerProcess, dict[str, float]]:
        proc = WorkerProcess(self.requested_device, self.limits)
        self.device, self.environment = proc.device, proc.environment
        return proc, {"worker_start": proc.start_ms, "import": proc.import_ms}

    @abstractmethod
    def run(self, job: dict[str, Any]) -> JobOutcome: ...

    @abstractmethod
    def close(self) -> None: ...


class IsolatedWorker(Worker):
    """A fresh process for every candidate: nothing one candidate does can reach the next."""

    def run(self, job: dict[str, Any]) -> JobOutcome:
        try:
            proc, timings = self._spawn()
        except WorkerStartError as exc:
            return JobOutcome(None, exc.line())
        try:
            outcome = proc.run(job, self.limits.timeout_s)
        finally:
            proc.close()
        outcome.timings.update(timings)
        return outcome

    def close(self) -> None:
        pass


class PersistentWorker(Worker):
    """One process reused across candidates while it stays healthy (start-up paid once).

    With ``standby``, a spare process starts importing as soon as the current one
    is replaced, so a crash or a cheat usually costs no start-up on the next
    candidate.
    """

    def __init__(self, device: str | None, limits: Limits, max_jobs: int = 200, standby: bool = True):
        super().__init__(device, limits)
        self.max_jobs = max_jobs
        self.standby = standby
        self.proc: WorkerProcess | None = None
        self.spare: WorkerProcess | None = None

    def run(self, job: dict[str, Any]) -> JobOutcome:
        timings: dict[str, float] = {"worker_start": 0.0, "import": 0.0}
        if self.proc is not None and (not self.proc.alive() or self.proc.jobs >= self.max_jobs):
            self._retire()
        if self.proc is None:
            try:
                self.proc, timings = self._take_spare() or self._spawn()
            except WorkerStartError as exc:
                return JobOutcome(None, exc.line())
        outcome = self.proc.run(job, self.limits.timeout_s)
        outcome.timings.update(timings)
        if outcome.payload is None or outcome.payload.get("tainted"):
            self._retire()
            self.restarts += 1
            if self.standby:
                self.spare = WorkerProcess(self.requested_device, self.limits, wait=False)
        return outcome

    def _take_spare(self) -> tuple[WorkerProcess, dict[str, float]] | None:
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        t0 = time.perf_counter()
        try:
            spare.wait_ready()
        except WorkerStartError:
            return None
        self.device, self.environment = spare.device, spare.environment
        # What the caller waited for: only the part of the start-up not already done in the background.
        waited = round((time.perf_counter() - t0) * 1e3, 1)
        return spare, {"worker_start": waited, "import": 0.0, "standby_import": spare.import_ms}

    def _retire(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc = None

    def close(self) -> None:
        self._retire()
        if self.spare is not None:
            self.spare.close()
            self.spare = None


def make_worker(isolation: str, device: str | None, limits: Limits) -> Worker:
    if isolation == "isolated":
        return IsolatedWorker(device, limits)
    if isolation == "persistent":
        return PersistentWorker(device, limits)
    raise ValueError(f"isolation must be 'isolated' or 'persistent', not {isolation!r}")
