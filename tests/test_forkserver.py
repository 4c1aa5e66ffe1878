"""The fork server: workers are forks of a clean interpreter that imported torch, never of the caller."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nodice.evaluation.forkserver import (
    ADDRESS_VARIABLE,
    ForkedWorker,
    SharedForkServer,
    forking_enabled,
    server_for,
)
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
        assert ppid == server.pid != os.getpid()  # never a fork of the caller
        assert pgrp == session == worker.proc.pid  # one kill takes the worker's own children too
        assert worker.device == "cpu" and worker.alive()
        os.kill(worker.proc.pid, signal.SIGSEGV)
        assert worker.proc.wait(10) == -signal.SIGSEGV  # the status travels as Popen's would
        assert worker._death() == "worker killed by SIGSEGV"
    finally:
        worker.close()


def test_the_server_has_imported_triton_for_its_cpu_workers() -> None:
    """Each worker would import Triton (a fifth of a second); its fork finds it imported already."""
    worker = WorkerProcess("cpu", Limits())
    try:
        server = server_for(clean_environment(PACKAGE_ROOT, None))
        maps = Path(f"/proc/{server.pid}/maps").read_text()
        assert "libtriton" in maps and "libtorch_cpu" in maps
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
            print(worker.proc.pid, server.pid, flush=True)
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


def _worker_of(caller_env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    """A caller process that starts one CPU worker and prints the worker's and its server's pids."""
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            from nodice.evaluation.forkserver import server_for
            from nodice.evaluation.limits import Limits, clean_environment
            from nodice.evaluation.workers import PACKAGE_ROOT, WorkerProcess

            worker = WorkerProcess("cpu", Limits())
            server = server_for(clean_environment(PACKAGE_ROOT, None))
            print(worker.proc.pid, server.pid, server.proc is None, flush=True)
            time.sleep(600)
            """
        ),
        encoding="utf-8",
    )
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=caller_env)


def test_a_shared_server_forks_each_caller_its_own_server_and_outlives_it(tmp_path: Path) -> None:
    shared = SharedForkServer(clean_environment(PACKAGE_ROOT, None))
    try:
        assert stat.S_IMODE(os.stat(shared.directory).st_mode) == 0o700  # this user's processes only
        env = {**os.environ, ADDRESS_VARIABLE: shared.address}
        caller = _worker_of(env, tmp_path)
        try:
            assert caller.stdout is not None
            worker_pid, server_pid, spawned_none = caller.stdout.readline().split()
            worker, server = int(worker_pid), int(server_pid)
            # worker → the caller's own server → the shared server: torch was imported once, there.
            assert spawned_none == "True"
            assert int(_stat(worker)[1]) == server and int(_stat(server)[1]) == shared.proc.pid
        finally:
            caller.kill()
            caller.wait(10)
        # The caller's server and worker go with the caller; the shared server serves the next one.
        assert _gone(worker, 10) and _gone(server, 10)
        assert shared.proc.poll() is None
        again = _worker_of(env, tmp_path)
        try:
            assert again.stdout is not None
            worker = int(again.stdout.readline().split()[0])
            assert int(_stat(int(_stat(worker)[1]))[1]) == shared.proc.pid
        finally:
            again.kill()
            again.wait(10)
    finally:
        shared.close()
    assert shared.proc.returncode == 0 and not Path(shared.directory).exists()


def test_a_caller_with_another_environment_is_refused_and_spawns_its_own(tmp_path: Path) -> None:
    shared = SharedForkServer(clean_environment(PACKAGE_ROOT, {"OMP_NUM_THREADS": "3"}))
    try:
        env = {**os.environ, ADDRESS_VARIABLE: shared.address}
        caller = _worker_of(env, tmp_path)
        try:
            assert caller.stdout is not None
            worker_pid, server_pid, spawned_none = caller.stdout.readline().split()
            assert spawned_none == "False"  # its own server, a child of the caller
            assert int(_stat(int(worker_pid))[1]) == int(server_pid)
            assert int(_stat(int(server_pid))[1]) == caller.pid
        finally:
            caller.kill()
            caller.wait(10)
        assert shared.proc.poll() is None
    finally:
        shared.close()


def test_an_agents_commands_fork_their_workers_from_the_drivers_shared_server(tmp_path: Path) -> None:
    from nodice.evaluation import workers
    from nodice.evolution.agents.command_agent import child_environment

    env = child_environment(None, None)
    assert workers._SHARED is not None and env[ADDRESS_VARIABLE] == workers._SHARED.address
    caller = _worker_of({**os.environ, **env}, tmp_path)
    try:
        assert caller.stdout is not None
        worker = int(caller.stdout.readline().split()[0])
        assert int(_stat(int(_stat(worker)[1]))[1]) == workers._SHARED.proc.pid
    finally:
        caller.kill()
        caller.wait(10)
