"""The fork server: workers are forks of a clean interpreter that imported torch, never of the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nodice.evaluation.forkserver import ForkedWorker, forking_enabled, server_for
from nodice.evaluation.limits import Limits, clean_environment
from nodice.evaluation.workers import PACKAGE_ROOT, WorkerProcess
from tests.conftest import ROOT


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2 :].split()


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = _stat(pid)[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":  # exited, waiting for its parent to read the status
            return True
        time.sleep(0.05)
    return False


def test_a_worker_is_a_fork_of_the_server_in_its_own_session_and_reports_its_death() -> None:
    worker = WorkerProcess("cpu", Limits())
    try:
        assert isinstance(worker.proc, ForkedWorker)
        server = server_for(clean_environment(PACKAGE_ROOT, None))
        ppid, pgrp, session = (int(x) for x in _stat(worker.proc.pid)[1:4])
        assert ppid == server.proc.pid != os.getpid()  # never a fork of the caller
        assert pgrp == session == worker.proc.pid  # one kill takes the worker's own children too
        assert worker.device == "cpu" and worker.alive()
        os.kill(worker.proc.pid, signal.SIGSEGV)
        assert worker.proc.wait(10) == -signal.SIGSEGV  # the status travels as Popen's would
        assert worker._death() == "worker killed by SIGSEGV"
    finally:
        worker.close()


def test_cuda_workers_are_new_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork of a process that asked the driver anything cannot use CUDA: the server serves CPU workers."""
    assert forking_enabled("cpu") and not forking_enabled("cuda")
    monkeypatch.setenv("NODICE_FORKSERVER", "0")
    assert not forking_enabled("cpu")


def test_without_the_fork_server_a_worker_is_a_new_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODICE_FORKSERVER", "0")
    worker = WorkerProcess("cpu", Limits())
    try:
        assert isinstance(worker.proc, subprocess.Popen)
        assert int(_stat(worker.proc.pid)[1]) == os.getpid()
    finally:
        worker.close()


def test_the_server_and_its_workers_go_when_the_caller_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from nodice.evaluation.forkserver import server_for
            from nodice.evaluation.limits import Limits, clean_environment
            from nodice.evaluation.workers import PACKAGE_ROOT, WorkerProcess

            worker = WorkerProcess("cpu", Limits())
            server = server_for(clean_environment(PACKAGE_ROOT, None))
            print(worker.proc.pid, server.proc.pid, flush=True)
            time.sleep(600)
            """
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert caller.stdout is not None
        worker_pid, server_pid = (int(x) for x in caller.stdout.readline().split())
        assert not _gone(worker_pid, 0.2) and not _gone(server_pid, 0.2)
    finally:
        caller.kill()
        caller.wait(10)
    # The server sees its socket close, kills its workers' process groups and exits.
    assert _gone(worker_pid, 10)
    assert _gone(server_pid, 10)
