"""A fork server for worker processes: torch imported once, each worker a fork of a clean interpreter.

Importing torch is most of a worker's start-up (about 1.5-2 s of CPU; the rest,
Triton and nodice, takes a tenth of it). A worker that runs one candidate
(``isolation="isolated"``) pays it for every candidate. The fork server is a
fresh interpreter, started like a worker with the worker's clean environment,
that imports torch (with its C++ extension builder on a CPU-only torch) and Triton (with
``TRITON_INTERPRET=1``, as the CPU workers it serves set it) and nothing else, starts no
thread and never touches a device; each worker is then a fork of it, which goes on exactly as a spawned
worker does (:func:`nodice.evaluation.worker_main.main`): its own session,
its own pipes, its limits, Triton, the harness, the job.

The worker is therefore never a fork of the caller (whatever the caller
imported, patched or started), only of this server, whose whole state is
"torch and Triton imported". Python's ``random`` is reseeded in every fork by Python
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

A shared server (:class:`SharedForkServer`) serves other processes: a nodice
process that finds its address in ``NODICE_FORKSERVER_ADDRESS`` connects,
and the shared server forks a server for it alone, which checks that the
caller wants the shared server's worker environment and then serves it as a
spawned one would. The command lines a test suite or an agent runs then fork
their workers from a process that imported torch once.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
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


def _import_libraries() -> None:
    import torch  # the point of the server

    if not torch.cuda._is_compiled():
        # Its import asks torch.cuda.is_available() where CUDA is compiled in, which initialises the
        # driver and poisons every fork; a CPU-only torch has nothing to initialise.
        import torch.utils.cpp_extension
    # Triton too (a fifth of a second a worker): every worker forked here is a CPU worker, whose
    # Triton runs in its interpreter, so the server imports it as such a worker would (a Triton that
    # reads the variable at import reads it set); its import starts no thread and touches no device.
    # The environment itself stays the one the server was started with, which its callers match.
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before


def _serve_connection(sock: socket.socket) -> None:
    """Fork a worker per request on ``sock`` until the caller goes away, then kill them. Never returns."""
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


def serve(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's; EOF ends us
    sock = socket.socket(fileno=fd)
    _import_libraries()
    _serve_connection(sock)


def environment_digest(env: dict[str, str]) -> str:
    """What a shared server and its caller compare: workers must get exactly the caller's environment."""
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


def serve_shared(listen_fd: int, owner_fd: int) -> None:
    """A shared server: each caller that connects gets its own server, a fork of this one.

    The forked server checks that the caller wants this environment, then serves it exactly as a
    server spawned for it would (its workers, their statuses, their end when the caller goes). This
    process imports torch once for every caller, and ends when its owner's socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=listen_fd)
    owner = socket.socket(fileno=owner_fd)
    _import_libraries()
    digest = environment_digest(dict(os.environ))
    servers: set[int] = set()
    while True:
        while servers:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                servers.clear()
                break
            if pid == 0:
                break
            servers.discard(pid)
        ready, _, _ = select.select([listener, owner], [], [], 1.0)
        if owner in ready:
            os._exit(0)  # the servers already forked serve their callers to the end
        if listener not in ready:
            continue
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            owner.close()
            conn.settimeout(READY_TIMEOUT_S)
            try:
                hello = json.loads(conn.recv(_MESSAGE_BYTES) or b"{}")
            except (OSError, ValueError):
                hello = {}
            if hello.get("environment") != digest:
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"refused": "another environment"}).encode())
                os._exit(0)
            conn.settimeout(None)
            _serve_connection(conn)
        conn.close()
        servers.add(pid)


# ---- the caller's side -----------------------------------------------------------------
class ForkServerError(Exception):
    pass


class ForkServer:
    """The caller's handle on one server (one per worker environment), shared by its threads: a server
    spawned for this caller, or (``address``) its own server forked by a shared one."""

    def __init__(self, env: dict[str, str], address: str | None = None):
        self.lock = threading.Lock()
        self.exits: dict[int, int] = {}
        self.alive = True
        self._ready = False
        self.pid: int | None = None  # the serving process, once it said it is ready
        self.proc: subprocess.Popen[bytes] | None = None
        if address is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                sock.connect(address)
                sock.send(json.dumps({"environment": environment_digest(env)}).encode())
            except OSError as e:
                sock.close()
                raise ForkServerError(f"no shared fork server at {address}: {e.strerror or e}") from None
            self.sock = sock
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodice.evaluation.forkserver", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        theirs.close()

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
        msg = json.loads(data)
        if "refused" in msg:
            self.alive = False
            raise ForkServerError(f"the shared fork server serves {msg['refused']}")
        if "exit" in msg:
            self.exits[msg["exit"]] = msg["code"]
        return msg

    def _wait_for(self, key: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            msg = self._read(min(left, 1.0))
            if msg is not None and key in msg:
                return msg[key]
            if self.proc is not None and self.proc.poll() is not None:
                self.alive = False
                raise ForkServerError(f"the fork server exited with status {self.proc.returncode}")
        raise ForkServerError(f"the fork server did not answer within {timeout:.0f} s")

    def wait_ready(self) -> None:
        with self.lock:
            if not self.alive:
                raise ForkServerError("the fork server is gone")
            if not self._ready:
                self.pid = self._wait_for("ready", READY_TIMEOUT_S)
                self._ready = True

    def fork(self, conn_fd: int, out_fd: int, device: str, memory: str) -> ForkedWorker:
        """A new worker talking on ``conn_fd`` and writing to ``out_fd`` (the caller closes its copies)."""
        self.wait_ready()
        with self.lock:
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
        if self.proc is None:
            return
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class SharedForkServer:
    """A fork server that other nodice processes of this user reach at ``address`` (a socket in a
    private directory): the test suite's command lines, an agent's ``nodice run`` calls. Each caller
    gets a fork of it that serves that caller alone, so no process imports torch for its workers but
    this one. It ends when this handle is closed or its owner exits."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.directory = tempfile.mkdtemp(prefix="nodice-fork-")  # mode 0700: this user only
        self.address = os.path.join(self.directory, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.address)
        listener.listen(64)
        self.owner, theirs = socket.socketpair()
        fds = (listener.fileno(), theirs.fileno())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodice.evaluation.forkserver", "--shared", *map(str, fds)],
            pass_fds=fds,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        listener.close()
        theirs.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.owner.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        with contextlib.suppress(OSError):
            os.unlink(self.address)
            os.rmdir(self.directory)


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


# Where a shared server listens (SharedForkServer.address), for the processes a nodice process starts.
ADDRESS_VARIABLE = "NODICE_FORKSERVER_ADDRESS"
_SERVERS: dict[tuple[tuple[str, str], ...], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def forking_enabled(device: str | None) -> bool:
    """Workers for the CPU only: CUDA must be initialised by a process's own start (a fork of a process
    that touched the driver cannot use it), so CUDA workers are new interpreters."""
    if os.environ.get("NODICE_FORKSERVER", "1") == "0" or not hasattr(os, "fork"):
        return False
    return device == "cpu" or (not device and not Path("/dev/nvidiactl").exists())


def server_for(env: dict[str, str]) -> ForkServer:
    """The server whose children get ``env`` (started on first use, closed at exit): forked for this
    process by the shared server named in ``NODICE_FORKSERVER_ADDRESS`` where that one serves ``env``,
    otherwise spawned."""
    key = tuple(sorted(env.items()))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.alive and (server.proc is None or server.proc.poll() is None):
            return server
        if server is not None:
            server.close()
        server = None
        address = os.environ.get(ADDRESS_VARIABLE)
        if address:
            try:
                server = ForkServer(env, address)
                server.wait_ready()
            except ForkServerError:
                if server is not None:
                    server.close()
                server = None
        server = _SERVERS[key] = server or ForkServer(env)
        return server


@atexit.register
def _close_all() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


if __name__ == "__main__":
    if sys.argv[1] == "--shared":
        serve_shared(int(sys.argv[2]), int(sys.argv[3]))
    else:
        serve(int(sys.argv[1]))
