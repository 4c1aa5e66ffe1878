"""How one implementation is timed: the method every candidate and every baseline shares.

CUDA: CUDA events around each call, a 256 MB write between repetitions so no
call finds its inputs in L2, warm-up first, and repetitions added in chunks
until the median stops moving (cheap kernels settle in a few dozen, so the
benchmark stays short). Each chunk is queued behind a GPU sleep long enough for
the host to enqueue the whole chunk first (``head_start_cycles``, from the
host's measured time per call), so the events time the GPU, not the launcher.
CPU (Triton's interpreter): the process's CPU time (``process_time``, every thread
of the worker) and the same median rule with fewer, longer calls. CPU time counts
the work a call does, not the other processes sharing the machine: on a loaded
2-core runner a wall clock moved a candidate's score by 2-3x between evaluations,
enough to reverse which of two kernels was faster.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from nodice.gate import progress

FLUSH_BYTES = 256 << 20
# The clock of a CPU measurement (seconds of CPU time of this process) and its name in a score.
CPU_CLOCK = time.process_time
CPU_CLOCK_NAME = "process_time"


@dataclass(frozen=True)
class TimingPolicy:
    chunk: int
    min_reps: int
    max_reps: int
    # Stop once adding a chunk moves the median by less than this fraction.
    settle: float
    # ... or once this much time has been spent on one implementation.
    budget_s: float


CUDA_POLICY = TimingPolicy(chunk=10, min_reps=20, max_reps=200, settle=0.01, budget_s=1.0)
CPU_POLICY = TimingPolicy(chunk=2, min_reps=4, max_reps=15, settle=0.05, budget_s=2.0)


@dataclass
class Timing:
    ms: float
    reps: int
    timer: str
    last: Any


# Created on first use. Kept in a container so the module attribute itself never changes:
# the harness-tampering guard compares module attributes before and after every candidate.
_FLUSH_BUFFER: dict[str, torch.Tensor] = {}


def _flush() -> torch.Tensor:
    if "l2" not in _FLUSH_BUFFER:
        _FLUSH_BUFFER["l2"] = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    return _FLUSH_BUFFER["l2"]


def _settled(times: list[float], policy: TimingPolicy, started: float) -> bool:
    if len(times) >= policy.max_reps or time.perf_counter() - started > policy.budget_s:
        return True
    if len(times) < max(policy.min_reps, 2 * policy.chunk):
        return False
    before = statistics.median(times[: -policy.chunk])
    now = statistics.median(times)
    return abs(now - before) <= policy.settle * now


# GPU clock cycles ``torch.cuda._sleep`` spins before each chunk, at least; and the clock assumed
# when converting the host's enqueue time into cycles (an H200 boosts to 1.98 GHz; a slower clock
# only makes the head start longer).
MIN_HEAD_START_CYCLES = 200_000
HEAD_START_CLOCK_HZ = 2.0e9
# The head start covers this multiple of the host's time to enqueue one chunk, up to about 10 ms
# (a call that waits for the GPU itself gains nothing from a longer one).
HEAD_START_MARGIN = 2.0
MAX_HEAD_START_CYCLES = 20_000_000


def head_start_cycles(host_s_per_call: float, chunk: int) -> int:
    """GPU cycles to queue before a chunk so the host enqueues all its calls before the GPU reaches them.

    Without it, a kernel whose launch costs the host more than the kernel costs the GPU is timed
    by the host: the GPU idles between the events, and the measured time follows the host's speed
    (another process on the machine, a slower Python launcher) rather than the kernel's.
    """
    cycles = host_s_per_call * chunk * HEAD_START_MARGIN * HEAD_START_CLOCK_HZ
    return max(MIN_HEAD_START_CYCLES, min(int(cycles), MAX_HEAD_START_CYCLES))


def time_cuda(fn: Callable[..., Any], args: tuple[Any, ...], policy: TimingPolicy = CUDA_POLICY) -> Timing:
    flush = _flush()
    progress.step()
    out = fn(*args)  # warm-up (compilation happened in the gate)
    torch.cuda.synchronize()
    # The host's cost of one call, enqueued behind a long GPU sleep so that nothing waits on the GPU.
    torch.cuda._sleep(MIN_HEAD_START_CYCLES * 50)
    t0 = time.perf_counter()
    flush.zero_()
    out = fn(*args)
    host_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    sleep_cycles = head_start_cycles(host_s, policy.chunk)
    times: list[float] = []
    started = time.perf_counter()
    while True:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(policy.chunk)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(policy.chunk)]
        progress.step()  # per chunk, not per call: the host must stay ahead of the device
        # Queue GPU work first so the host runs ahead and launch latency stays off the clock.
        torch.cuda._sleep(sleep_cycles)
        for s, e in zip(starts, ends, strict=True):
            flush.zero_()
            s.record()
            out = fn(*args)
            e.record()
        torch.cuda.synchronize()
        times.extend(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
        if _settled(times, policy, started):
            return Timing(statistics.median(times), len(times), "cuda-events, L2 flushed", out)


def time_cpu(fn: Callable[..., Any], args: tuple[Any, ...], policy: TimingPolicy = CPU_POLICY) -> Timing:
    progress.step()
    out = fn(*args)
    times: list[float] = []
    started = time.perf_counter()
    while True:
        for _ in range(policy.chunk):
            progress.step()
            t0 = CPU_CLOCK()
            out = fn(*args)
            times.append((CPU_CLOCK() - t0) * 1e3)
        if _settled(times, policy, started):
            return Timing(statistics.median(times), len(times), CPU_CLOCK_NAME, out)


def measure(fn: Callable[..., Any], args: tuple[Any, ...], device: torch.device) -> Timing:
    return time_cuda(fn, args) if device.type == "cuda" else time_cpu(fn, args)
