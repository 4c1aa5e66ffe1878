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


# Native threads the runtime libraries start for themselves (CUDA driver, torch pools).
_LIBRARY_THREAD_PREFIXES = ("cuda", "pt_", "nvidia", "triton")


def native_threads() -> dict[int, str]:
    """Thread id → name of every OS thread of this process."""
    out: dict[int, str] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    out[int(tid)] = f.read().strip()
            except OSError:
                continue  # it ended meanwhile
    except OSError:  # pragma: no cover - non-Linux
        return {}
    return out


class ThreadCensus:
    """Python threads (and, after a warm-up, OS threads) before a call, compared after it."""

    def __init__(self, native: bool = True) -> None:
        self.python = {t.ident for t in threading.enumerate()}
        self.native = set(native_threads()) if native else None

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
        if self.native is None:
            return None
        fresh_native = {
            tid: name
            for tid, name in native_threads().items()
            if tid not in self.native and not name.startswith(_LIBRARY_THREAD_PREFIXES)
        }
        # Python threads that ended are gone from both views; the rest were counted above.
        python_tids = {t.native_id for t in threading.enumerate()}
        fresh_native = {tid: n for tid, n in fresh_native.items() if tid not in python_tids}
        if fresh_native:
            names = ", ".join(sorted(set(fresh_native.values())))
            return f"{len(fresh_native)} native thread(s) started during the call are still running ({names})"
        return None
