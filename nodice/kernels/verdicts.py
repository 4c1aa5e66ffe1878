"""The gate's verdict on a bundled kernel for one device, computed once and remembered.

Batch-invariant mode routes a torch op to a kernel only once the whole gate
(static, correctness, dynamic) has passed that exact file on that kind of
device. The gate takes seconds on CPU and longer on a GPU, so its verdict is
kept twice:

* in the process, keyed by task, the kernel file's SHA-256 and the device name;
* optionally on disk, in ``gate-verdicts.json`` under the user's cache folder
  (``$NODICE_CACHE_DIR``, else ``$XDG_CACHE_HOME/nodice``, else
  ``~/.cache/nodice``), keyed additionally by the nodice, torch and Triton
  versions, so that an upgrade of any of them, or another GPU model, runs the
  gate again. A verdict of ``error`` (the gate could not judge) is never
  written to disk: it says nothing about the kernel.

Only the entry file is hashed: the bundled kernels are single files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import torch

import nodice
from nodice.loader import read_source
from nodice.tasks import get_task

log = logging.getLogger(__name__)

CACHE_FILE_NAME = "gate-verdicts.json"

Source = Literal["gate", "process", "disk", "unverified"]


@dataclass(frozen=True)
class GateVerdict:
    """What the gate said about one kernel file for one task on one device model.

    ``dtypes`` are the dtypes the gate validated: the task's own dtype on the
    device (correctness and dynamic validation) and each probe dtype whose
    dynamic validation ran without a mismatch. ``source`` says where the
    verdict came from: this call of the gate, the process cache, the disk cache,
    or nowhere (``verify=False``).
    """

    task: str
    kernel: str
    sha256: str
    device: str
    verdict: str
    reason: str
    dtypes: tuple[str, ...]
    seed: int | None
    source: Source

    @property
    def passed(self) -> bool:
        return self.verdict == "pass" or self.source == "unverified"


_PROCESS: dict[tuple[str, str, str], GateVerdict] = {}
_LOCK = threading.Lock()


def forget_verdicts() -> None:
    """Drop the process cache (the disk cache stays); the next request runs the gate or reads the disk."""
    with _LOCK:
        _PROCESS.clear()


def device_name(device: torch.device) -> str:
    """The name a verdict is keyed by: the GPU model, or ``cpu`` (the interpreter is the same everywhere)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def default_cache_file() -> Path:
    root = os.environ.get("NODICE_CACHE_DIR")
    if root:
        return Path(root) / CACHE_FILE_NAME
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nodice" / CACHE_FILE_NAME


def kernel_sha256(path: Path) -> str:
    return hashlib.sha256(read_source(path).encode()).hexdigest()


def _disk_key(task: str, sha256: str, name: str) -> str:
    import triton

    versions = f"nodice={nodice.__version__},torch={torch.__version__},triton={triton.__version__}"
    return f"{task}|{sha256}|{name}|{versions}"


def _read_disk(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable verdict cache %s: %s", path, exc)
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def _write_disk(path: Path, key: str, verdict: GateVerdict) -> None:
    entries = _read_disk(path)
    record = {k: v for k, v in asdict(verdict).items() if k != "source"}
    record["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    entries[key] = record
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot write verdict cache %s: %s", path, exc)


def _from_record(record: dict[str, Any]) -> GateVerdict | None:
    try:
        return GateVerdict(
            task=str(record["task"]),
            kernel=str(record["kernel"]),
            sha256=str(record["sha256"]),
            device=str(record["device"]),
            verdict=str(record["verdict"]),
            reason=str(record.get("reason", "")),
            dtypes=tuple(str(d) for d in record.get("dtypes", ())),
            seed=record.get("seed"),
            source="disk",
        )
    except (KeyError, TypeError):
        return None


def _validated_dtypes(result: Any) -> tuple[str, ...]:
    """The task's dtype, plus each probe dtype the gate's notes record as run without a mismatch."""
    if result.verdict != "pass":
        return ()
    out = [result.dtype]
    for note in result.notes:
        name, sep, rest = note.partition(" probe: ")
        if sep and rest.startswith("no mismatch") and name not in out:
            out.append(name)
    return tuple(out)


def _seed(result: Any) -> int | None:
    for note in result.notes:
        if note.startswith("seed="):
            try:
                return int(note.removeprefix("seed="))
            except ValueError:
                return None
    return None


def _run_gate(task: str, path: Path, sha256: str, device: torch.device, name: str) -> GateVerdict:
    from nodice.gate.pipeline import check

    log.info("running the BI gate on %s (task %s) on %s", path, task, name)
    if device.type == "cuda":
        with torch.cuda.device(device):
            result = check(path, task, device="cuda")
    else:
        result = check(path, task, device=device.type)
    return GateVerdict(
        task=task,
        kernel=str(path),
        sha256=sha256,
        device=name,
        verdict=result.verdict,
        reason=result.reason,
        dtypes=_validated_dtypes(result),
        seed=_seed(result),
        source="gate",
    )


def unverified(task: str, path: Path, device: torch.device) -> GateVerdict:
    """The stand-in verdict of ``verify=False``: every dtype the gate would have validated, none checked."""
    t = get_task(task)
    dtypes = [t.dtype_for(device), *t.probe_dtypes(device)]
    return GateVerdict(
        task=task,
        kernel=str(path),
        sha256=kernel_sha256(path),
        device=device_name(device),
        verdict="unverified",
        reason="not verified (verify=False)",
        dtypes=tuple(str(d).removeprefix("torch.") for d in dtypes),
        seed=None,
        source="unverified",
    )


def gate_verdict(task: str, path: Path, device: torch.device, cache_file: Path | None) -> GateVerdict:
    """The gate's verdict on ``path`` for ``task`` on ``device``: remembered, read from disk, or run now."""
    sha256 = kernel_sha256(path)
    name = device_name(device)
    key = (task, sha256, name)
    with _LOCK:
        known = _PROCESS.get(key)
    if known is not None:
        return replace(known, kernel=str(path), source="process")
    verdict: GateVerdict | None = None
    disk_key = _disk_key(task, sha256, name)
    if cache_file is not None:
        record = _read_disk(cache_file).get(disk_key)
        verdict = _from_record(record) if isinstance(record, dict) else None
        if verdict is not None:
            verdict = replace(verdict, kernel=str(path))
    if verdict is None:
        verdict = _run_gate(task, path, sha256, device, name)
        if cache_file is not None and verdict.verdict != "error":
            _write_disk(cache_file, disk_key, verdict)
    with _LOCK:
        _PROCESS[key] = verdict
    return verdict
