"""A worker's stdout and stderr, read by the parent from a pipe: the head and tail of each job's output.

A candidate may print without end. Nothing of it reaches the disk: the parent
keeps the first ``HEAD_BYTES`` and the last ``TAIL_BYTES`` of each job (the
tail holds the Python stacks a hung worker writes before it is killed), counts
what lies between, and drops it. The candidate is judged as if it had printed
nothing.
"""

from __future__ import annotations

import os
import select
import time

HEAD_BYTES = 1000
TAIL_BYTES = 4000
READ_BYTES = 1 << 16


class OutputCapture:
    """The read end of a worker's output pipe; ``pump`` it while waiting on the worker."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.open = True
        self.start_job()

    def fileno(self) -> int:
        return self.fd

    def start_job(self) -> None:
        """From here on, output belongs to the next job (anything pending is read first and forgotten)."""
        self.pump()
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def _keep(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]

    def pump(self) -> None:
        """Read whatever the pipe holds now, without blocking."""
        while self.open:
            try:
                chunk = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.open = False
                return
            self._keep(chunk)

    def drain(self, timeout_s: float) -> None:
        """Read until the writers are gone (end of file) or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while self.open and (left := deadline - time.monotonic()) > 0:
            select.select([self.fd], [], [], min(left, 0.1))
            self.pump()

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """This job's output: all of it, or its head, a line saying how much was dropped, and its tail."""
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output dropped ...]\n{tail}"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd, self.open = -1, False
