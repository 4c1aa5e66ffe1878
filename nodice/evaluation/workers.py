"""Workers behind one interface: isolated (a fresh process per candidate), persistent, or inline.

Both start a new process (never a fork of the caller: a fork of a fresh
interpreter that has imported torch and nothing else, :mod:`nodice.evaluation.forkserver`,
or a new interpreter) with a clean environment, talk to it over a private pipe
(jobs, results, and the progress messages that time each step), read its
output from another (only the head and tail of each job's are kept), and
enforce the time and memory limits from the parent, which asks a hung worker
for its stacks and kills the whole process group on a breach.
The persistent worker keeps its process (and the libraries it imported) across
candidates and replaces it after any failure, any sign of tampering, a broken
CUDA context, or every ``max_jobs`` evaluations.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_any
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import DeviceError, NodiceError
from nodice.evaluation.budgets import Budgets, stage_name
from nodice.evaluation.clock import JobClock, StartupClock, compiler_running, run_delay_s
from nodice.evaluation.forkserver import (
    ADDRESS_VARIABLE,
    ForkedWorker,
    ForkServerError,
    SharedForkServer,
    forking_enabled,
    server_for,
)
from nodice.evaluation.limits import Limits, clean_environment, resident_mb
from nodice.evaluation.output import OutputCapture

if TYPE_CHECKING:
    from nodice.evaluation.request import EvaluationRequest

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Importing torch and triton can be slow on a busy machine; this is not the candidate's time.
STARTUP_TIMEOUT_S = 300.0
POLL_S = 0.1


_SHARED: SharedForkServer | None = None


def shared_fork_server_environment() -> dict[str, str]:
    """What gives the nodice processes this one starts (an agent's ``nodice run`` calls) its shared fork
    server: started on first use and ended with this process; nothing where workers are not forked."""
    global _SHARED
    if not forking_enabled(None):
        return {}
    env = clean_environment(PACKAGE_ROOT, None)
    if _SHARED is None or _SHARED.proc.poll() is not None or _SHARED.env != env:
        if _SHARED is not None:
            _SHARED.close()
        _SHARED = SharedForkServer(env)
        atexit.register(_SHARED.close)
    return {ADDRESS_VARIABLE: _SHARED.address}


class WorkerStartError(NodiceError):
    kind = "worker failed to start"


class WorkerDeviceError(WorkerStartError):
    """The worker started but found no such device: the one line says so, without the worker's exit."""

    kind = DeviceError.kind


@dataclass
class JobOutcome:
    """What came back from one job: the worker's payload, or why there is none."""

    payload: dict[str, Any] | None
    failure: str = ""
    log: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    # The worker that ran it (several run side by side under an executor): its device and environment.
    device: str = ""
    environment: dict[str, Any] = field(default_factory=dict)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class WorkerProcess:
    """One spawned worker interpreter, the pipe to it, and the pipe its output comes back on."""

    def __init__(
        self, device: str | None, limits: Limits, wait: bool = True, env: dict[str, str] | None = None
    ):
        self.limits = limits
        parent_sock, child_sock = socket.socketpair()
        self.conn = Connection(os.dup(parent_sock.fileno()))
        parent_sock.close()
        child_fd = os.dup(child_sock.fileno())
        child_sock.close()
        out_read, out_write = os.pipe()
        memory = "" if limits.memory_mb is None else str(limits.memory_mb)
        t0 = time.perf_counter()
        environment = clean_environment(PACKAGE_ROOT, env)
        self.proc: subprocess.Popen[bytes] | ForkedWorker
        try:
            if not forking_enabled(device):
                raise ForkServerError("off")
            self.proc = server_for(environment).fork(child_fd, out_write, device or "", memory)
        except ForkServerError:  # a new interpreter, as the fork server would have been
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nodice.evaluation.worker_main", str(child_fd), device or "", memory],
                pass_fds=(child_fd,),
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out_write,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: one kill takes its children too
            )
        os.close(child_fd)
        os.close(out_write)
        self.output = OutputCapture(out_read)
        self.jobs = 0
        self.started = t0
        self.ready = False
        self.device, self.memory_limit, self.import_ms, self.start_ms = "", "", 0.0, 0.0
        self.home = ""  # the worker's working directory, made by the worker
        self.environment: dict[str, Any] = {}
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Block until the worker has imported its libraries (raises WorkerStartError if it cannot)."""
        if self.ready:
            return
        ready = self._wait(StartupClock(STARTUP_TIMEOUT_S, time.monotonic()))
        if ready.payload is None:
            tail = ready.log.strip().splitlines()[-1:] if ready.log.strip() else []
            self.close()
            if tail and tail[0].startswith(f"{DeviceError.kind}: "):
                # The worker's own one line (``--device cuda`` on a machine without one): that is the cause.
                raise WorkerDeviceError(tail[0].removeprefix(f"{DeviceError.kind}: "))
            raise WorkerStartError(ready.failure + (f": {tail[0]}" if tail else ""))
        info = ready.payload
        self.device = info["device"]
        self.environment = info["environment"]
        self.memory_limit = info["memory_limit"]
        self.import_ms = info["import_ms"]
        self.home = str(info.get("home", ""))
        self.start_ms = round((time.perf_counter() - self.started) * 1e3, 1)
        self.ready = True

    # ---- I/O with limits -------------------------------------------------------------
    def _compiler_busy(self) -> bool:
        return compiler_running(self.proc.pid, self.proc.pid)

    def _run_delay(self) -> float | None:
        return run_delay_s(self.proc.pid)

    def _ended(self, failure: str) -> JobOutcome:
        """The worker is gone (or killed): what it printed up to the end, and why."""
        self.output.drain(2.0)
        return JobOutcome(None, failure, self.output.text())

    def _wait(self, clock: JobClock | StartupClock) -> JobOutcome:
        """The worker's result, or why none came (death, timeout, memory); its progress feeds ``clock``."""
        limit_mb = self.limits.resident_mb
        while True:
            watched: list[Any] = [self.conn] + ([self.output] if self.output.open else [])
            try:
                ready = wait_for_any(watched, POLL_S)
            except OSError:
                ready = []
            if self.output in ready:
                self.output.pump()
            if self.conn in ready:
                try:
                    kind, payload = self.conn.recv()
                except (EOFError, OSError, ConnectionResetError):
                    time.sleep(POLL_S)  # the worker is gone; its exit status says why
                else:
                    if kind in ("ready", "result"):
                        self.output.pump()
                        return JobOutcome(payload, log=self.output.text())
                    clock.note(kind, payload, time.monotonic())
            if self.proc.poll() is not None:
                return self._ended(self._death(clock))
            rss = resident_mb(self.proc.pid)
            if rss > limit_mb:
                self.kill()
                return self._ended(f"out of memory: {rss:.0f} MB resident, limit {limit_mb} MB")
            now = time.monotonic()
            if clock.hung(now, self._compiler_busy, self._run_delay):
                self._dump_stacks()
                self.kill()
                return self._ended(clock.message(now))

    def _dump_stacks(self) -> None:
        """Ask a hung worker for its Python stacks (faulthandler writes them to its output), briefly."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, signal.SIGUSR1)
            self.output.drain(0.5)

    def _death(self, clock: JobClock | StartupClock | None = None) -> str:
        code = self.proc.returncode
        where = f" in {stage_name(clock.stage)}" if isinstance(clock, JobClock) else ""
        if code is not None and code < 0:
            name = _signal_name(code)
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"worker killed by {name}{where}{hint}"
        # sys.exit is caught where the candidate's code runs; an exit that is not an exception is not.
        how = " (the process was ended from inside: os._exit or a native exit)" if code == 0 else ""
        return f"worker exited with status {code}{where} before reporting{how}"

    def run(self, job: EvaluationRequest) -> JobOutcome:
        self.output.start_job()
        budgets = Budgets.for_task(job.task, self.device)
        clock = JobClock(budgets, self.limits.timeout_s, time.monotonic())
        try:
            self.conn.send(("job", job))
        except (OSError, BrokenPipeError):
            self.proc.wait(5)
            return self._ended(self._death())
        self.jobs += 1
        outcome = self._wait(clock)
        clock.stop(time.monotonic())
        outcome.timings["slowest_call"] = round(clock.slowest_call_s * 1e3, 1)
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
        if self.home and self.proc.poll() is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = ""

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send(("stop", None))
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.conn.close()
        self.output.close()


class Worker(ABC):
    """Runs evaluation jobs in a sandboxed process; never raises for a bad candidate."""

    def __init__(self, device: str | None, limits: Limits, env: dict[str, str] | None = None):
        self.requested_device = device
        self.limits = limits
        # Added to the clean environment of every process it starts (e.g. the GPU it may see).
        self.env = dict(env or {})
        self.device: str = device or ""
        self.environment: dict[str, Any] = {}
        self.restarts = 0

    def _spawn(self) -> tuple[WorkerProcess, dict[str, float]]:
        proc = WorkerProcess(self.requested_device, self.limits, env=self.env)
        self.device, self.environment = proc.device, proc.environment
        return proc, {"worker_start": proc.start_ms, "import": proc.import_ms}

    @abstractmethod
    def run(self, job: EvaluationRequest) -> JobOutcome: ...

    @abstractmethod
    def close(self) -> None: ...


class IsolatedWorker(Worker):
    """A fresh process for every candidate: nothing one candidate does can reach the next."""

    def run(self, job: EvaluationRequest) -> JobOutcome:
        try:
            proc, timings = self._spawn()
        except WorkerStartError as exc:
            return JobOutcome(None, exc.line())
        try:
            outcome = proc.run(job)
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

    def __init__(
        self,
        device: str | None,
        limits: Limits,
        max_jobs: int = 200,
        standby: bool = True,
        env: dict[str, str] | None = None,
    ):
        super().__init__(device, limits, env)
        self.max_jobs = max_jobs
        self.standby = standby
        self.proc: WorkerProcess | None = None
        self.spare: WorkerProcess | None = None

    def run(self, job: EvaluationRequest) -> JobOutcome:
        timings: dict[str, float] = {"worker_start": 0.0, "import": 0.0}
        if self.proc is not None and (not self.proc.alive() or self.proc.jobs >= self.max_jobs):
            self._retire()
        if self.proc is None:
            try:
                self.proc, timings = self._take_spare() or self._spawn()
            except WorkerStartError as exc:
                return JobOutcome(None, exc.line())
        outcome = self.proc.run(job)
        outcome.timings.update(timings)
        if outcome.payload is None or outcome.payload.get("tainted"):
            self._retire()
            self.restarts += 1
            if self.standby:
                self.spare = WorkerProcess(self.requested_device, self.limits, wait=False, env=self.env)
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


class InlineWorker(Worker):
    """This process: the same request and the same guards, with no process around the candidate.

    No time or memory limit applies and a crash or hang is the caller's; what it is for is a
    kernel engineer's debugger or profiler (``nodice check --no-sandbox``) and static analysis,
    which runs none of the candidate's code.
    """

    def run(self, job: EvaluationRequest) -> JobOutcome:
        from nodice.evaluation.job import error_payload, run_job
        from nodice.gate.runtime import prepare, resolve_device

        try:
            device = resolve_device(self.requested_device)
        except NodiceError as exc:
            return JobOutcome(error_payload(job, self.requested_device or "", exc.line()))
        prepare(device)
        self.device = device.type
        try:
            payload = run_job(job, device)
        except Exception as exc:  # a harness bug still gets an answer, as in a worker process
            return JobOutcome(None, f"internal error: {type(exc).__name__}: {exc}"[:400], device=device.type)
        return JobOutcome(payload, device=device.type)

    def close(self) -> None:
        pass


def make_worker(
    isolation: str, device: str | None, limits: Limits, env: dict[str, str] | None = None
) -> Worker:
    if isolation == "isolated":
        return IsolatedWorker(device, limits, env)
    if isolation == "persistent":
        return PersistentWorker(device, limits, env=env)
    if isolation == "inline":
        return InlineWorker(device, limits, env)
    raise ValueError(f"isolation must be 'isolated', 'persistent' or 'inline', not {isolation!r}")
