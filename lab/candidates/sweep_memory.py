"""Sweep the pinned constants of the memory-bound candidates on the GPU (bf16, every workload).

For each candidate (norms, decode) and each alternative setting of its module constants, times
the kernel on every workload of its task with nodice's CUDA timer and reports GB/s next to the
seed's. Settings never depend on the batch: each one is a whole pin table, applied to every
workload. One JSON line per (candidate, setting, workload) is appended to ``--out`` as it goes.

    python3 lab/candidates/sweep_memory.py --out $OUT/sweep_memory.jsonl [--seconds 150]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import time
from pathlib import Path

import torch

from nodice.measuring.throughput import workload_args
from nodice.measuring.timing import measure
from nodice.tasks import get_task

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _warp_tables() -> list[dict[str, int]]:
    # One constant at a time (each one only changes the rows of its own width).
    pinned = {"WARPS_2K": 8, "WARPS_4K": 8, "WARPS_8K": 16}
    out = []
    for key in pinned:
        for warps in (2, 4, 8, 16, 32):
            if warps != pinned[key]:
                out.append({**pinned, key: warps})
    return out


def _decode_tables() -> list[dict[str, int]]:
    out = []
    for bn, split, warps, stages in itertools.product((64, 128), (256, 512, 1024), (4, 8), (2, 3)):
        if split < 2 * bn:
            continue
        out.append(
            {
                "BLOCK_N_D128": bn,
                "SPLIT_TOKENS_D128": split,
                "NUM_WARPS_D128": warps,
                "NUM_STAGES_D128": stages,
            }
        )
    return out


# (task, candidate file, settings, workloads swept (None: all)).
_DECODE_WORKLOADS = (
    "llama3-8b-b1-kv32k",
    "llama3-8b-b8-kv8k",
    "llama3-8b-b32-kv8k",
    "llama3-8b-b128-kv32k",
    "qwen3-30b-a3b-b8-kv8k",
    "qwen3-32b-b128-kv8k",
)
PLAN = [
    ("rmsnorm", "rmsnorm_row.py", _warp_tables, None),
    ("add_rmsnorm", "add_rmsnorm_row.py", _warp_tables, None),
    ("layernorm", "layernorm_row.py", _warp_tables, None),
    ("attention_decode", "attention_decode_two_launch.py", _decode_tables, _DECODE_WORKLOADS),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--task", action="append", help="only these tasks")
    args = ap.parse_args()
    device = torch.device("cuda")
    dtype = torch.bfloat16
    deadline = time.monotonic() + args.seconds
    out = open(args.out, "a")  # noqa: SIM115 (appended to line by line until the end)
    plan = [p for p in PLAN if not args.task or p[0] in args.task]
    per_task = args.seconds / max(1, len(plan))
    for task_name, file, tables, only in plan:
        task = get_task(task_name)
        workloads = [w for w in task.workloads() if only is None or w.name in only]
        task_deadline = min(deadline, time.monotonic() + per_task)
        cand = _load(HERE / file, f"cand_{task_name}")
        seed = _load(ROOT / "nodice" / "examples" / task_name / "seed.py", f"seed_{task_name}")
        inputs = {w.name: workload_args(task, w, device, dtype, 0) for w in workloads}
        gbs = {w.name: task.bytes_moved(w, dtype) / 1e9 for w in workloads}
        refs = {}
        for w in workloads:
            t = measure(seed.kernel, inputs[w.name], device)
            refs[w.name] = t.ms
            row = {
                "task": task_name,
                "setting": "seed",
                "workload": w.name,
                "ms": t.ms,
                "gbps": gbs[w.name] / (t.ms / 1e3),
            }
            out.write(json.dumps(row) + "\n")
        out.flush()
        original = {k: getattr(cand, k) for k in tables()[0]}
        for table in [original, *tables()]:
            if time.monotonic() > task_deadline:
                print(f"{task_name}: out of time", flush=True)
                break
            for k, v in table.items():
                setattr(cand, k, v)
            total = []
            for w in workloads:
                try:
                    t = measure(cand.kernel, inputs[w.name], device)
                    ms, err = t.ms, None
                except Exception as exc:  # a setting that does not compile or run
                    ms, err = None, f"{type(exc).__name__}: {str(exc)[:200]}"
                row = {
                    "task": task_name,
                    "setting": table,
                    "workload": w.name,
                    "ms": ms,
                    "error": err,
                    "gbps": gbs[w.name] / (ms / 1e3) if ms else None,
                    "vs_seed": refs[w.name] / ms if ms else None,
                }
                out.write(json.dumps(row) + "\n")
                if ms:
                    total.append(refs[w.name] / ms)
            out.flush()
            if total:
                g = torch.tensor(total).log().mean().exp().item()
                print(f"{task_name} {table}: geomean vs seed {g:.3f}", flush=True)
        for k, v in original.items():
            setattr(cand, k, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
