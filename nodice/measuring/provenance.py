"""Where and with what a benchmark number was made: machine, versions, commit, date."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def environment(device: str) -> tuple[str, dict[str, str]]:
    """A description of the machine and the versions that produced a table."""
    import numpy
    import torch
    import triton

    import nodice

    machine = f"{platform.machine()} CPU ({_cpu_name()}), {_cores()} cores"
    if device == "cuda" and torch.cuda.is_available():
        machine = f"{torch.cuda.get_device_name(0)}; host {machine}"
    versions = {
        "nodice": getattr(nodice, "__version__", "?"),
        "commit": _git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
    }
    return machine, versions


def gpu_versions() -> dict[str, str]:
    """CUDA runtime, cuDNN and driver versions (empty without a GPU)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    out = {"cuda": str(torch.version.cuda), "cudnn": str(torch.backends.cudnn.version())}
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        out["driver"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        out["driver"] = "unknown"
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _git_commit(where: Path | None = None) -> str:
    """The commit measured: ``NODICE_COMMIT`` when the tree was copied without its history; a
    checkout whose tracked files differ from its commit says ``<commit>+changes``."""
    if os.environ.get("NODICE_COMMIT"):
        return os.environ["NODICE_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=where or Path(__file__).resolve().parent,
        )
        commit = out.stdout.strip()
        if not commit:
            return "unknown"
        # Tracked files that differ from that commit: the number is not that commit's.
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=where or Path(__file__).resolve().parent,
        )
        return f"{commit}+changes" if changed.returncode == 0 and changed.stdout.strip() else commit
    except (OSError, subprocess.SubprocessError):
        return "unknown"
