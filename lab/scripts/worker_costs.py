"""What a worker costs: start-up per isolated evaluation, and a candidate that floods its output.

    OMP_NUM_THREADS=1 python lab/scripts/worker_costs.py            # fork server (CPU workers)
    NODICE_FORKSERVER=0 OMP_NUM_THREADS=1 python lab/scripts/worker_costs.py

Prints, per evaluation of the rmsnorm seed, the wall time and the worker's start-up (``worker_start``,
ms), then the wall time of one `nodice check` of a correct rmsnorm kernel that prints 20 000 lines per
call (about 200 MB over the gate).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nodice.evaluation import Evaluator

ROOT = Path(__file__).resolve().parents[2]
FLOOD = """
import torch


def kernel(x, weight, eps):
    for i in range(20000):
        print("chatty kernel chatty kernel chatty kernel chatty kernel", i)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
"""


def main() -> None:
    with Evaluator(device="cpu") as ev:
        for i in range(6):
            t0 = time.perf_counter()
            e = ev.evaluate(ROOT / "nodice/examples/rmsnorm/seed.py", "rmsnorm", seed=i)
            print(
                f"evaluation {i}: {time.perf_counter() - t0:.2f} s, "
                f"worker_start {e.timings['worker_start']:.0f} ms"
            )
    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "flood.py"
        cand.write_text(FLOOD, encoding="utf-8")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "nodice",
                "check",
                str(cand),
                "-t",
                "rmsnorm",
                "--device",
                "cpu",
                "--seed",
                "2",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        first = proc.stdout.splitlines()[0] if proc.stdout else proc.stderr.strip()
        print(f"flooding candidate: {time.perf_counter() - t0:.1f} s, {first}")


if __name__ == "__main__":
    main()
