"""The worker process: imports the heavy libraries once, then runs evaluation jobs sent over a pipe.

Started by :mod:`nodice.evaluation.workers` as a fresh interpreter (never a
fork of the caller) with a clean environment. While a job runs it reports each
stage, step and Triton compilation to the parent, which times them
(:mod:`nodice.evaluation.heartbeat`). After each job it checks itself —
harness intact, no stray threads, CUDA context healthy — and exits when
anything is off, so the parent starts a clean replacement.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any


def _health(device: str, pristine: Any, threads_at_start: int) -> str | None:
    """Why this process should not run another candidate, or ``None``."""
    import torch

    from nodice.evaluation.guards.harness_tampering import HarnessSnapshot

    if device == "cuda":
        try:
            torch.cuda.synchronize()
        except Exception as exc:  # a sticky CUDA error poisons every later call
            return f"CUDA context unusable: {str(exc).splitlines()[0][:200]}"
    changes = pristine.changes(HarnessSnapshot.take())
    if changes:
        return f"harness changed: {'; '.join(changes[:3])}"
    if threading.active_count() > threads_at_start:
        return f"{threading.active_count() - threads_at_start} stray thread(s) alive"
    return None


def serve(conn: Connection, device_name: str | None, memory_mb: int | None) -> None:
    t0 = time.perf_counter()
    import torch

    from nodice.gate.runtime import prepare, resolve_device

    device = resolve_device(device_name)
    # Before triton is imported: it reads TRITON_INTERPRET once.
    prepare(device)
    import triton  # noqa: F401

    from nodice.errors import mark_sandboxed
    from nodice.evaluation.environment import describe_environment
    from nodice.evaluation.guards import library_call
    from nodice.evaluation.guards.harness_tampering import HarnessSnapshot
    from nodice.evaluation.heartbeat import Heartbeat
    from nodice.evaluation.job import run_job
    from nodice.evaluation.limits import apply_in_worker
    from nodice.evaluation.output import capped_output
    from nodice.gate import progress
    from nodice.tasks import all_tasks

    memory_note = apply_in_worker(memory_mb, device.type)
    # A folder of its own as the working directory (removed by the parent with the worker): what a
    # candidate writes by a relative path lands there, never in the caller's folder (an agent's
    # `nodice run eval` runs in the run's workspace, beside the journal and the lineage).
    home = tempfile.mkdtemp(prefix="nodice-worker-")
    os.chdir(home)
    if device.type == "cuda":
        torch.cuda.init()
    torch.randn(1 << 20).sum()  # starts the intra-op thread pool, which a candidate's census must not count
    with library_call.watching(library_call.LibraryWatch(library_call.ForbiddenOps())):
        torch.ones(1).mul(2)
    for task in all_tasks():
        library_call.install_reference_tripwire(task)
    beat = Heartbeat(conn)
    beat.install()  # before the snapshot: the hooks are part of the harness
    mark_sandboxed()
    import_ms = (time.perf_counter() - t0) * 1e3
    pristine = HarnessSnapshot.take()
    threads_at_start = threading.active_count()
    beat.send(
        "ready",
        {
            "import_ms": round(import_ms, 1),
            "device": device.type,
            "memory_limit": memory_note,
            "home": home,
            "environment": describe_environment(device.type),
        },
    )
    while True:
        try:
            kind, job = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        try:
            with capped_output():  # printing beyond the cap costs the candidate nothing
                payload = run_job(job, device)
        except BaseException as exc:  # a harness bug must still produce an answer (and a
            # KeyboardInterrupt here is code's: the worker is in a session of its own)
            where = _blame(exc, job)
            what = f"{type(exc).__name__}: {exc}"
            line = f"not the candidate's fault: {where} raised {what}" if where else f"internal error: {what}"
            if where is None and _out_of_memory(exc):
                # No file of the candidate's (or anyone's) on the stack: the task's own inputs did not fit.
                line = f"out of memory preparing the task's inputs, not in the candidate: {what}"
            traceback.print_exc()
            payload = {"internal_error": line[:400], "tainted": True}
        progress.stage("health")
        unhealthy = _health(device.type, pristine, threads_at_start)
        if unhealthy and not payload.get("taint_reason"):
            payload["taint_reason"] = unhealthy
        payload["tainted"] = bool(payload.get("tainted") or unhealthy)
        beat.send("result", payload)
        if payload["tainted"]:
            return


def _blame(exc: BaseException, job: Any) -> str | None:
    """Which file that is not the candidate's raised ``exc``: the reference file, a FlashInfer-Bench
    definition's reference or a contract, named by the innermost of its frames; "" when the
    candidate's own file comes first; None when none of these files is in the traceback."""
    from pathlib import Path

    from nodice.references import is_reference_task, parse_task_name

    candidate = Path(getattr(job, "path", "")).resolve()
    task = str(getattr(job, "task", ""))
    reference = parse_task_name(task).path.resolve() if is_reference_task(task) else None
    contracts = {Path(c).resolve() for c in getattr(job, "contracts", ())}
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        if name.endswith(".reference>"):  # compiled from a definition's "reference" field
            return f"the definition's reference (line {frame.lineno})"
        if name.startswith("<"):
            continue
        path = Path(name).resolve()
        if path == candidate:
            return ""
        if path == reference:
            return f"the reference {path.name}:{frame.lineno}"
        if path in contracts:
            return f"the contract {path.name}:{frame.lineno}"
    return None


def _out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def main(argv: list[str]) -> int:
    faulthandler.enable()
    # The parent sends SIGUSR1 before killing a worker that ran out of time: where it hung goes to its output.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    fd = int(argv[1])
    device = argv[2] or None
    memory_mb = int(argv[3]) if argv[3] else None
    conn = Connection(fd)
    code = 0
    try:
        serve(conn, device, memory_mb)
    except Exception as exc:  # before the handshake (no such device, a broken install): one line
        from nodice.errors import NodiceError

        what = exc.kind if isinstance(exc, NodiceError) else type(exc).__name__
        print(f"{what}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        code = 1
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
        # Without waiting for threads a candidate may have left behind.
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
