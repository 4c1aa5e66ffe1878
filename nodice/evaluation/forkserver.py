"""A fork server for worker processes: torch imported once, each worker a fork of a clean interpreter.

Importing torch is most of a worker's start-up (about 1.5-2 s of CPU; the rest,
Triton and nodice, takes a tenth of it). A worker that runs one candidate
(``isolation="isolated"``) pays it for every candidate. The fork server is a
fresh interpreter, started like a worker with the worker's clean environment,
that imports torch (with its C++ extension builder on a CPU-only torch) and nothing else, starts no
thread and never touches a device; each worker is then a fork of it, which goes on exactly as a spawned
worker does (:func:`nodice.evaluation.worker_main.main`): its own session,
its own pipes, its limits, Triton, the harness, the job.

The worker is therefore never a fork of the caller (whatever the caller
imported, patched or started), only of this server, whose whole state is
"torch imported". Python's ``random`` is reseeded in every fork by Python
itself, NumPy's global generator by the child.

Protocol (one ``SOCK_SEQPACKET`` socket pair): the caller sends the worker's
arguments with the two file descriptors the worker talks on (its job socket
and its output pipe); the server forks, closes its copies and answers with the
child's pid. The server reaps its children and reports each exit status
(``Popen.returncode`` convention: a negative number is a signal). When the
caller goes away (the socket closes) the server kills its workers' process
groups and exits.

It serves CPU workers. A CUDA worker is a new interpreter, as before: CUDA
cannot be used in a fork of a process that initialised the driver, and asking
whether a GPU exists (which ``torch.utils.cpp_extension`` does on import) already
does. ``NODICE_FORKSERVER=0`` turns it off: every worker is then spawned as a
new interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

# How long the server may take to import torch (a busy host stretches it; not the candidate's time).
READY_TIMEOUT_S = 300.0
_MESSAGE_BYTES = 4096
_POLL_S = 0.05


# ---- the server process ----------------------------------------------------------------
def _child(sock: socket.socket, fds: list[int], request: dict[str, str]) -> None:
    """In the forked worker: become a worker process exactly as a spawned one would. Never returns."""
    code = 1
    try:
        sock.close()
        os.setsid()  # its own process group: one kill takes its children too
        conn_fd, out_fd = fds
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed()  # fresh entropy, as a fresh interpreter would have
        from nodice.evaluation.worker_main import main

        code = main(["worker_main", str(conn_fd), request["device"], request["memory"]])
    finally:
        os._exit(code)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def serve(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's; EOF ends us
    sock = socket.socket(fileno=fd)
    import torch  # the point of the server

    if not torch.cuda._is_compiled():
        # Its import asks torch.cuda.is_available() where CUDA is compiled in, which initialises the
        # driver and poisons every fork; a CPU-only torch has nothing to initialise.
        import torch.utils.cpp_extension

    sock.send(json.dumps({"ready": os.getpid()}).encode())
    children: set[int] = set()
    while True:
        _reap(sock, children)
        ready, _, _ = select.select([sock], [], [], _POLL_S)
        if not ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, _MESSAGE_BYTES, 2)
        except OSError:
            msg, fds = b"", []
        if not msg:
            break  # the caller is gone
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, request)
        for f in fds:
            os.close(f)
        children.add(pid)
        sock.send(json.dumps({"pid": pid}).encode())
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(0)


# ---- the caller's side -----------------------------------------------------------------
class ForkServerError(Exception):
    pass


class ForkServer:
    """The caller's handle on one server (one per worker environment), shared by its threads."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.lock = threading.Lock()
        self.exits: dict[int, int] = {}
        self.alive = True
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodice.evaluation.forkserver", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        theirs.close()
        self._ready = False

    def _read(self, timeout: float) -> dict[str, int] | None:
        """One message (None if none came within ``timeout``); exits are filed as they pass."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        try:
            data = self.sock.recv(_MESSAGE_BYTES)
        except OSError:
            data = b""
        if not data:
            self.alive = False
            raise ForkServerError("the fork server is gone")
        msg: dict[str, int] = json.loads(data)
        if "exit" in msg:
            self.exits[msg["exit"]] = msg["code"]
        return msg

    def _wait_for(self, key: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            msg = self._read(min(left, 1.0))
            if msg is not None and key in msg:
                return msg[key]
            if self.proc.poll() is not None:
                self.alive = False
                raise ForkServerError(f"the fork server exited with status {self.proc.returncode}")
        raise ForkServerError(f"the fork server did not answer within {timeout:.0f} s")

    def fork(self, conn_fd: int, out_fd: int, device: str, memory: str) -> ForkedWorker:
        """A new worker talking on ``conn_fd`` and writing to ``out_fd`` (the caller closes its copies)."""
        with self.lock:
            if not self.alive:
                raise ForkServerError("the fork server is gone")
            if not self._ready:
                self._wait_for("ready", READY_TIMEOUT_S)
                self._ready = True
            request = json.dumps({"device": device, "memory": memory}).encode()
            socket.send_fds(self.sock, [request], [conn_fd, out_fd])
            pid = self._wait_for("pid", 60.0)
        return ForkedWorker(self, pid)

    def collect(self) -> None:
        """File the exit statuses the server has sent so far (without blocking)."""
        with self.lock, contextlib.suppress(ForkServerError):
            while self.alive and self._read(0) is not None:
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class ForkedWorker:
    """A worker forked by the server: the subset of ``subprocess.Popen`` the sandbox uses."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.collect()
            code = self.server.exits.pop(self.pid, None)
            if code is not None:
                self.returncode = code
            elif not self.server.alive and not Path(f"/proc/{self.pid}").exists():
                self.returncode = 255  # reaped by someone else: its status is lost with the server
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)


_SERVERS: dict[tuple[tuple[str, str], ...], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def forking_enabled(device: str | None) -> bool:
    """Workers for the CPU only: CUDA must be initialised by a process's own start (a fork of a process
    that touched the driver cannot use it), so CUDA workers are new interpreters."""
    if os.environ.get("NODICE_FORKSERVER", "1") == "0" or not hasattr(os, "fork"):
        return False
    return device == "cpu" or (not device and not Path("/dev/nvidiactl").exists())


def server_for(env: dict[str, str]) -> ForkServer:
    """The server whose children get ``env`` (started on first use, closed at exit)."""
    key = tuple(sorted(env.items()))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None or not server.alive or server.proc.poll() is not None:
            if server is not None:
                server.close()
            server = _SERVERS[key] = ForkServer(env)
        return server


@atexit.register
def _close_all() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
