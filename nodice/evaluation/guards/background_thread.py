"""Rule ``background-thread``: all work happens inside the call, on the calling thread's timeline.

A thread still alive after the kernel returned (Python or native) is work the
timer never sees. Counted after a warm-up call, so thread pools that libraries
create on first use do not count.
"""

from __future__ import annotations

import os
import threading
import time

RULE = "background-thread"
DESCRIPTION = "leaves a thread running after the call returns (work outside the timed region)"


def os_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - non-Linux
        return threading.active_count()


class ThreadCensus:
    """Python threads (and, after a warm-up, OS threads) before a call, compared after it."""

    def __init__(self, native: bool = True) -> None:
        self.python = {t.ident for t in threading.enumerate()}
        self.native = os_thread_count() if native else None

    def join_new(self, timeout_s: float) -> None:
        """Give threads started since the census up to ``timeout_s`` (in all) to finish."""
        deadline = time.monotonic() + timeout_s
        for t in threading.enumerate():
            if t.ident not in self.python and t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def new_threads(self) -> str | None:
        fresh = [t for t in threading.enumerate() if t.ident not in self.python and t.is_alive()]
        if fresh:
            names = ", ".join(sorted(t.name for t in fresh))
            return f"{len(fresh)} Python thread(s) still running after the call returned ({names})"
        native = os_thread_count()
        if self.native is not None and native > self.native:
            return f"{native - self.native} native thread(s) started during the call are still running"
        return None
