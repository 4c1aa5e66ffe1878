"""Run the gate for one candidate in a spawned worker process.

A segfault, ``os._exit``, a hang or an OOM kill in the candidate costs that
candidate an ``error`` verdict with the reason; the caller's process is never
taken down.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from typing import Any

from nodice.gate.result import CheckResult

DEFAULT_TIMEOUT_S = 300.0


def _worker(conn: Any, kwargs: dict[str, Any]) -> None:
    from nodice.gate.pipeline import check

    result = check(**kwargs)
    conn.send(result.to_dict())
    conn.close()


def _death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker vanished"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"worker killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return f"worker exited with status {exitcode} before reporting"


def check_isolated(timeout_s: float = DEFAULT_TIMEOUT_S, **kwargs: Any) -> CheckResult:
    """``nodice.gate.pipeline.check`` in a fresh spawned process with a wall-clock limit."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(child, kwargs), daemon=True)
    proc.start()
    child.close()
    payload: dict[str, Any] | None = None
    error: str | None = None
    try:
        if parent.poll(timeout_s):
            try:
                payload = parent.recv()
            except EOFError:
                proc.join(5)
                error = f"kernel crashed: {_death_reason(proc.exitcode)}"
        else:
            error = f"kernel timed out: no verdict after {timeout_s:.0f} s"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if payload is not None:
        return CheckResult.from_dict(payload)
    return CheckResult(
        verdict="error",
        task=str(kwargs.get("task", "")),
        candidate=str(kwargs.get("path", "")),
        device=str(kwargs.get("device") or ""),
        dtype="",
        error=error,
        reason=error or "",
    )
