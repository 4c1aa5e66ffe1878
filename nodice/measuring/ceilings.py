"""The device's physical ceilings, measured on the device itself in the same run as the kernels.

A workload's ``limit_fraction`` is the candidate's throughput over the ceiling
that bounds its task: the dense matrix-multiply rate for TFLOP/s tasks, the
device-to-device copy bandwidth (bytes read plus bytes written) for GB/s tasks.
Datasheet numbers are not used: a 990 TFLOP/s bf16 datasheet figure is ~785 on
random data on an H200, and the fraction of an unreachable number says little.

Both are measured on random data (zeros run faster through the tensor cores),
after a warm-up, as the median of timed repetitions, once per process.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

import torch

from nodice.measuring.score import GBPS, TFLOPS
from nodice.measuring.timing import CPU_CLOCK

# Sizes that fill an H200 (8192³ bf16 products; a 2 GiB copy is ~30× its L2) and stay quick on a CPU.
_CUDA_MATMUL_N = 8192
_CUDA_COPY_BYTES = 2 << 30
_CPU_MATMUL_N = 1024
_CPU_COPY_BYTES = 128 << 20


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings: ``matmul_tflops`` in ``matmul_dtype``, ``copy_gbps`` read + write."""

    device: str
    matmul_dtype: str
    matmul_tflops: float
    copy_gbps: float
    method: str = ""

    def for_unit(self, unit: str) -> float | None:
        if unit == TFLOPS:
            return self.matmul_tflops
        if unit == GBPS:
            return self.copy_gbps
        return None

    def limits(self) -> dict[str, float]:
        """The SPEC §6 ``limits`` object: ``{"bf16_tflops": …, "copy_gbps": …}``."""
        return {
            f"{self.matmul_dtype}_tflops": round(self.matmul_tflops, 1),
            "copy_gbps": round(self.copy_gbps, 1),
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _timed(fn: Any, device: torch.device, reps: int) -> float:
    """Median milliseconds of ``fn()`` after two warm-up calls."""
    fn()
    fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:  # the clock the candidates are timed with on CPU
            t0 = CPU_CLOCK()
            fn()
            times.append((CPU_CLOCK() - t0) * 1e3)
    return statistics.median(times)


def _matmul_ms(device: torch.device, dtype: torch.dtype, n: int, gen: torch.Generator) -> float:
    a = torch.randn((n, n), generator=gen, device=device, dtype=torch.float32).to(dtype)
    b = torch.randn((n, n), generator=gen, device=device, dtype=torch.float32).to(dtype)
    c = torch.empty((n, n), device=device, dtype=dtype)
    return _timed(lambda: torch.mm(a, b, out=c), device, 20 if device.type == "cuda" else 5)


def _copy_ms(device: torch.device, nbytes: int, gen: torch.Generator) -> float:
    src = torch.randint(0, 255, (nbytes,), generator=gen, device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return _timed(lambda: dst.copy_(src), device, 20 if device.type == "cuda" else 5)


def measure_ceilings(device: torch.device) -> Ceilings:
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    n = _CUDA_MATMUL_N if cuda else _CPU_MATMUL_N
    nbytes = _CUDA_COPY_BYTES if cuda else _CPU_COPY_BYTES
    gen = torch.Generator(device=device).manual_seed(0)
    mm_ms = _matmul_ms(device, dtype, n, gen)
    copy_ms = _copy_ms(device, nbytes, gen)
    if cuda:
        torch.cuda.empty_cache()
    name = str(dtype).removeprefix("torch.")
    return Ceilings(
        device=torch.cuda.get_device_name(device) if cuda else "cpu",
        matmul_dtype=name,
        matmul_tflops=2.0 * n**3 / (mm_ms * 1e-3) / 1e12,
        copy_gbps=2.0 * nbytes / (copy_ms * 1e-3) / 1e9,
        method=f"torch.mm {n}³ {name} on random data; copy_ of {nbytes >> 20} MiB counted read + write; "
        "medians after warm-up",
    )


# One measurement per process and device: the evaluation service scores many candidates in one worker.
_MEASURED: dict[str, Ceilings] = {}


def ceilings_for(device: torch.device) -> Ceilings:
    key = str(device)
    if key not in _MEASURED:
        _MEASURED[key] = measure_ceilings(device)
    return _MEASURED[key]


def adopt_ceilings(device: torch.device, measured: dict[str, Any]) -> Ceilings:
    """Use ceilings measured earlier in the same run (by the process that started this one)."""
    known = {k: v for k, v in measured.items() if k in Ceilings.__dataclass_fields__}
    ceilings = Ceilings(**known)
    _MEASURED[str(device)] = ceilings
    return ceilings
