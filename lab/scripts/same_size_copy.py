"""A bandwidth kernel against a copy of its own bytes: how far is each row from what one launch of
that size can reach?

For every workload of the named GB/s tasks (bf16, the task's inputs): the bundled kernel, each
library baseline that loads here (through nodice's baseline loaders, as `nodice bench kernels`
runs them) and a `copy_` of half the kernel's bytes moved (read + write = the same bytes), timed
with nodice's timer (CUDA events, L2 flushed), each as a fraction of the large-copy ceiling. The
same-size copy is timed last on each workload (the first thing timed after a large free can be
slowed: lab/results/h100_2026-12-07d/README.md). JSON after every workload.
    python3 lab/scripts/same_size_copy.py --json OUT.json [--task rmsnorm --task add_rmsnorm]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from nodice.kernels import bundled_kernel
from nodice.loader import load_kernel
from nodice.measuring.baselines import load_baselines
from nodice.measuring.ceilings import ceilings_for
from nodice.measuring.throughput import same_size_copy_gbps, timed_call
from nodice.measuring.timing import time_cuda
from nodice.tasks import get_task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--task", action="append")
    ap.add_argument("--kernel", action="append", default=[], help="TASK=PATH: time this kernel file too")
    args = ap.parse_args()
    dev = torch.device("cuda")
    copy_gbps = ceilings_for(dev).copy_gbps
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "commit": os.environ.get("NODICE_COMMIT", ""),
        "copy_gbps": round(copy_gbps, 1),
        "rows": [],
    }
    for task_name in args.task or ["rmsnorm", "add_rmsnorm"]:
        task = get_task(task_name)
        kernel = load_kernel(bundled_kernel(task_name), "kernel", task, dev, torch.bfloat16).fn
        impls, missing = load_baselines(task_name, dev)
        others = [
            (p, load_kernel(p, "kernel", task, dev, torch.bfloat16).fn)
            for t, p in (k.split("=", 1) for k in args.kernel)
            if t == task_name
        ]
        report.setdefault("missing", {})[task_name] = dict(missing)
        for w in task.workloads():
            inputs = task.workload_inputs(w, torch.Generator().manual_seed(0), dev, torch.bfloat16)
            nbytes = task.bytes_moved(w, torch.bfloat16)
            row: dict[str, Any] = {"task": task_name, "workload": w.name, "bytes": int(nbytes)}
            runs = [("nodice", kernel, inputs)] + [(n, timed_call(i, inputs), ()) for n, i in impls.items()]
            runs += [(Path(p).stem, extra, inputs) for p, extra in others]
            for name, fn, fn_args in runs:
                try:
                    fn(*fn_args)
                    ms = time_cuda(fn, fn_args).ms
                except Exception as exc:  # a baseline that does not take this shape
                    row[name] = f"error: {type(exc).__name__}"
                    continue
                row[name] = round(nbytes / (ms * 1e-3) / 1e9 / copy_gbps, 4)
            row["same-size copy"] = round(same_size_copy_gbps(nbytes, dev) / copy_gbps, 4)
            del inputs
            torch.cuda.empty_cache()
            torch.cuda._sleep(200_000_000)  # about 0.1 s of a busy GPU before the next workload's timings
            torch.cuda.synchronize()
            report["rows"].append(row)
            cells = "  ".join(
                f"{k} {v:.1%}" if isinstance(v, float) else f"{k} {v}"
                for k, v in row.items()
                if k not in ("task", "workload", "bytes")
            )
            print(f"{task_name:12s} {w.name:28s} {cells}", flush=True)
            report["written"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
