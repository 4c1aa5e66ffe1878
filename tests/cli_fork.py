"""The test suite's ``nodice`` command lines, each a fork of an interpreter that imported torch once.

A command line that judges a candidate imports torch, about 3 s of CPU on a small machine, and the
suite runs a few hundred of them. :class:`CliForker` starts one interpreter per test process that
imports torch and nothing of nodice, starts no thread and touches no device; every command is then
a fork of it that goes on exactly as ``python -m nodice ARGS`` does: its own session (a time-out
kills its whole process group, workers included), the caller's working folder and environment,
stdin from ``/dev/null``, stdout and stderr to files the caller reads, and its exit status as
``subprocess`` reports it (a negative number is a signal). Nothing of the test process is in the
command's process, as with a new interpreter; what differs is only that torch was imported before
the command's arguments were read.

Protocol, one connection per command (so threads of one test can run commands side by side): the
caller sends ``(argv, cwd, env, stdout_path, stderr_path)``; the server forks a handler for the
connection, which forks the command, sends its pid, waits for it and sends its exit status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

_READY_TIMEOUT_S = 300.0


def _run_command(argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """In the command's process: become ``python -m nodice ARGV`` and never return."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = [sys.executable, *argv]
        sys.path[0] = cwd  # as `python -m` puts the working folder first
        import runpy

        try:
            runpy.run_module("nodice", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except BaseException:  # what an uncaught exception does to a new interpreter
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        _exit_as_an_interpreter_does(code)


def _exit_as_an_interpreter_does(code: int) -> None:
    """Wait for the command's threads, run its ``atexit`` callbacks, flush, exit: what a new
    interpreter does at the end of ``python -m nodice`` (``os._exit`` alone would skip the first two)."""
    import atexit
    import threading

    # An interpreter reports a failing callback and exits all the same; a closed stream has nothing
    # left to write.
    for step in (threading._shutdown, atexit._run_exitfuncs, sys.stdout.flush, sys.stderr.flush):  # type: ignore[attr-defined]
        with contextlib.suppress(BaseException):
            step()
    os._exit(code)


def _handle(conn: Connection) -> None:
    """In a handler process: run one command and report its pid, then its exit status."""
    argv, cwd, env, out, err = conn.recv()
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(argv, cwd, env, out, err)
    conn.send(pid)
    _, status = os.waitpid(pid, 0)
    conn.send(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    conn.close()


def serve(address: str) -> None:
    """The server: import torch, say so, then fork a handler per connection until stdin closes."""
    import select

    import torch  # noqa: F401 - the point of this process

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    listener = Listener(address, family="AF_UNIX")
    print("ready", flush=True)
    sock = listener._listener._socket  # type: ignore[attr-defined]
    while True:
        ready, _, _ = select.select([sock, sys.stdin], [], [])
        if sys.stdin in ready and not sys.stdin.readline():
            break  # the test process went away
        if sock in ready:
            conn = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:
                    _handle(conn)
                finally:
                    os._exit(0)
            conn.close()
    listener.close()


def _text(data: bytes) -> str:
    """As ``subprocess.run(text=True)`` reads a pipe: UTF-8 here, universal newlines."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


class CliForker:
    """One server for one test process; :meth:`run` is ``subprocess.run`` of ``python -m nodice``."""

    def __init__(self, env: dict[str, str]) -> None:
        self._dir = tempfile.mkdtemp(prefix="nodice-cli-")
        self.address = os.path.join(self._dir, "socket")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r}); "
                f"from tests.cli_fork import serve; serve({self.address!r})",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the command-line fork server did not start: {line!r}")

    def run(self, argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="nodice-cli-io-") as io:
            out, err = os.path.join(io, "out"), os.path.join(io, "err")
            conn = Client(self.address, family="AF_UNIX")
            try:
                conn.send((argv, str(cwd), dict(os.environ), out, err))
                pid = conn.recv()
                deadline = time.monotonic() + timeout
                while not conn.poll(max(0.0, min(1.0, deadline - time.monotonic()))):
                    if time.monotonic() >= deadline:
                        os.killpg(pid, signal.SIGKILL)
                        raise subprocess.TimeoutExpired(["nodice", *argv], timeout)
                code = conn.recv()
            finally:
                conn.close()
            read = [_text(Path(path).read_bytes()) for path in (out, err)]
        return subprocess.CompletedProcess(["nodice", *argv], code, *read)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        import shutil

        shutil.rmtree(self._dir, ignore_errors=True)
