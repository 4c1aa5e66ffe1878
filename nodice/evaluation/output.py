"""A worker's stdout and stderr, read by the parent from a pipe: the head and tail of each job's output.

A candidate may print without end. Nothing of it reaches the disk: the parent
keeps the first ``HEAD_BYTES`` and the last ``TAIL_BYTES`` of each job (the
tail holds the Python stacks a hung worker writes before it is killed), counts
what lies between, and drops it. The candidate is judged as if it had printed
nothing.

Dropping must cost nothing, and a pipe cannot make it so: a candidate printing
line by line pays a system call a line and wakes the parent as often. So the
worker caps Python-level output (``print``, ``sys.stdout.write``) where it is
made (:func:`capped_output`): the head passes through, the rest stays in memory
as a rolling tail, written with the count of what was dropped when the job
ends. What bypasses Python (native code writing to the file descriptors, the
stacks of a hung worker) still reaches the parent's capture, which caps it the
same way.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import Any

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
        return f"{head}{dropped_line(self.dropped)}{tail}"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd, self.open = -1, False


def dropped_line(count: int) -> str:
    return f"\n[... {count} bytes of output dropped ...]\n"


class CappedStream(io.TextIOBase):
    """A text stream that passes the first ``head`` characters to ``target`` and keeps the last ``tail``.

    A write past the head is an append to a list; every few kilobytes the list is joined and cut
    back to the tail, so a line costs about what writing it to ``/dev/null`` would.
    """

    def __init__(self, target: io.TextIOBase | Any, head: int, tail: int):
        self.target, self.head_left, self.tail_max = target, head, tail
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0  # bytes (UTF-8) cut from the tail so far

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if self.head_left > 0:
            part = s[: self.head_left]
            self.target.write(part)
            self.head_left -= len(part)
            if len(part) == len(s):
                return len(s)
            self.parts.append(s[len(part) :])
            self.size += len(s) - len(part)
        else:
            self.parts.append(s)
            self.size += len(s)
        if self.size > 8 * self.tail_max:
            self._cut()
        return len(s)

    def _cut(self) -> None:
        text = "".join(self.parts)
        cut = max(len(text) - self.tail_max, 0)
        self.dropped += len(text[:cut].encode("utf-8", "replace"))
        self.parts, self.size = [text[cut:]], len(text) - cut

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return int(self.target.fileno())

    def isatty(self) -> bool:
        return False

    def finish(self) -> None:
        """Write what is kept of the tail (after the count of what was dropped) to ``target``."""
        self._cut()
        if self.dropped:
            self.target.write(dropped_line(self.dropped))
        self.target.write("".join(self.parts))
        self.target.flush()
        self.parts, self.size, self.dropped = [], 0, 0


@contextlib.contextmanager
def capped_output(head: int = HEAD_BYTES, tail: int = TAIL_BYTES // 2) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` capped for the block (one budget for both, as one pipe has)."""
    real_out, real_err = sys.stdout, sys.stderr
    capped = CappedStream(real_out, head, tail)
    sys.stdout = sys.stderr = capped
    try:
        yield
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        with contextlib.suppress(Exception):
            real_err.flush()
            capped.finish()
