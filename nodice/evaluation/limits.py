"""What a worker process may use: wall-clock time, memory, disk, and the environment it sees.

Time is a budget per step of the job (:mod:`nodice.evaluation.budgets`), or one
fixed limit on the whole job when the caller sets ``timeout_s``.
Memory is limited twice. In the worker, ``RLIMIT_AS`` caps the address space
on CPU-only workers, so an allocation beyond the limit fails inside the
candidate. CUDA workers cannot have it: the driver reserves tens of gigabytes of
virtual address space at start-up and fails under any useful cap. For them (and
as a backstop for all), the parent polls the worker's resident set and kills it
when it goes over. Device memory is the CUDA allocator's: an out-of-memory there
is a Python exception, reported as a crash, after which the worker is replaced.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

# Environment variables a worker keeps; everything else (tokens, keys, proxies) is dropped.
KEPT_VARIABLES = (
    "PATH",
    "HOME",
    "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "OMP_NUM_THREADS",
)
# Triton, and the JIT caches and settings of the library baselines (FlashInfer, CuTe DSL, flash-attn-4, fla).
KEPT_PREFIXES = ("TRITON_", "FLASHINFER_", "CUTE_DSL_", "FLASH_ATTENTION_", "FLA_")
# Address space the CPU worker needs beyond the resident memory it is allowed (torch, triton, numpy).
ADDRESS_SPACE_OVERHEAD_MB = 4096
# Largest file a worker may write: a candidate writing a file forever cannot fill the disk. (What it
# prints goes to the parent through a pipe, which keeps only its head and tail.)
FILE_SIZE_LIMIT_MB = 1024


def default_memory_mb() -> int:
    """Half the host's memory, at most 32 GiB: room for the largest CPU problem, not for a runaway."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError):  # pragma: no cover - non-POSIX
        return 8192
    return int(min(total // 2, 32768))


@dataclass(frozen=True)
class Limits:
    # None: each step of a job gets its budget; a number: the whole job gets that many seconds.
    timeout_s: float | None = None
    memory_mb: int | None = None

    @property
    def resident_mb(self) -> int:
        return self.memory_mb if self.memory_mb is not None else default_memory_mb()


def clean_environment(package_root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: the allow-list above, plus nodice importable from ``package_root``."""
    env = {k: v for k, v in os.environ.items() if k in KEPT_VARIABLES or k.startswith(KEPT_PREFIXES)}
    paths = [str(package_root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PATH", "/usr/bin:/bin")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def apply_in_worker(memory_mb: int | None, device: str) -> str:
    """Set the worker's own limits; returns how memory is limited, for the record."""
    _, hard_fsize = resource.getrlimit(resource.RLIMIT_FSIZE)
    fsize = FILE_SIZE_LIMIT_MB << 20
    if hard_fsize == resource.RLIM_INFINITY or fsize <= hard_fsize:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard_fsize))
    if memory_mb is None or device == "cuda":
        return "resident-set watchdog"
    cap = (memory_mb + ADDRESS_SPACE_OVERHEAD_MB) << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return f"RLIMIT_AS={cap >> 20} MB + resident-set watchdog"


def resident_mb(pid: int) -> float:
    """Resident memory of a process in MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
