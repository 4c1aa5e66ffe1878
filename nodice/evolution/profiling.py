"""Profile a candidate on the GPU (torch.profiler), in a child process with a time limit.

Run as ``python -m nodice.evolution.profiling KERNEL TASK ENTRY``: it loads the
candidate, runs the task's first GPU workload a few times under the profiler
and prints the table of the most expensive device kernels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def profile_candidate(path: Path, task: str, entry: str = "kernel", timeout_s: float = 180.0) -> str:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return "profiling needs PyTorch"
    if not torch.cuda.is_available():
        return (
            "profiling needs a CUDA device and this run is on CPU; the benchmark's per-workload "
            "times are the profile here (Triton's interpreter costs about one numpy call per tile "
            "operation, so fewer programs and fewer loop trips are what make a kernel faster)"
        )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "nodice.evolution.profiling", str(path), task, entry],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"profiling timed out after {timeout_s:.0f} s"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"profiling failed: {tail}"
    return proc.stdout


def _main(path: str, task_name: str, entry: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from nodice.loader import load_kernel
    from nodice.tasks import get_task

    task = get_task(task_name)
    device = torch.device("cuda")
    dtype = task.dtype_for(device)
    cand = load_kernel(path, entry, task, device, dtype)
    workload = task.workloads()[0]
    args = task.workload_inputs(workload, torch.Generator().manual_seed(0), device, dtype)
    for _ in range(3):  # compile and warm up outside the trace
        cand.fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            cand.fn(*args)
        torch.cuda.synchronize()
    print(f"workload {workload.name} {workload.params}, 10 calls")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
