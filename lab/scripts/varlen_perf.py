"""attention_varlen's benchmark rows, timed for several kernel files and the library baselines in one
process: a quick comparison of candidate variants (the gate's `--bench` runs one candidate and takes
minutes). Each kernel's output is compared bit for bit with the first file's.

    python3 lab/scripts/varlen_perf.py --json OUT.json FILE [FILE ...] [--baseline NAME ...]

Times are triton.testing.do_bench medians (L2 flushed before each call), in ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

import torch
from triton.testing import do_bench

from nodice.measuring.baselines import find_baseline
from nodice.tasks import get_task


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(call: Any) -> float:
    call()
    torch.cuda.synchronize()
    return float(do_bench(call, warmup=50, rep=300, return_mode="median"))


def _row(task: Any, w: Any, kernels: dict[str, Any], baselines: dict[str, Any]) -> dict[str, Any]:
    device = torch.device("cuda")
    inputs = task.workload_inputs(w, torch.Generator().manual_seed(0), device, torch.bfloat16)
    row: dict[str, Any] = {"workload": w.name, "ms": {}, "same_as_first": {}}
    first = None
    for name, fn in kernels.items():
        out = fn(*inputs)
        first = out if first is None else first
        row["same_as_first"][name] = bool(torch.equal(out, first))
        row["ms"][name] = _time(lambda fn=fn: fn(*inputs))
    for name, impl in baselines.items():
        try:
            prepared = impl.prepare(*inputs) if hasattr(impl, "prepare") else None
            row["ms"][name] = _time(prepared or (lambda impl=impl: impl(*inputs)))
        except Exception as exc:  # a library that cannot run a row: noted, not an end
            row["ms"][name] = None
            row.setdefault("errors", {})[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        torch.cuda.empty_cache()
    flops = task.flops(w)
    row["tflops"] = {k: (flops / v / 1e9 if v else None) for k, v in row["ms"].items()}
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--baseline", action="append", default=None)
    ap.add_argument("--workload", action="append", default=None)
    args = ap.parse_args()
    device = torch.device("cuda")
    task = get_task("attention_varlen")
    kernels = {f.stem: _load(f, f"k{i}").kernel for i, f in enumerate(args.files)}
    baselines: dict[str, Any] = {}
    for name in args.baseline or ["FlashInfer batch prefill", "flash varlen (torch)"]:
        try:
            baselines[name] = find_baseline(name, device, "attention_varlen")[1].load()
        except Exception as exc:  # a missing library is a note, not an end
            print(f"baseline {name}: {type(exc).__name__}: {exc}", flush=True)
    rows: list[dict[str, Any]] = []
    for w in task.workloads():
        if args.workload and w.name not in args.workload:
            continue
        row = _row(task, w, kernels, baselines)
        rows.append(row)
        ms = "  ".join(f"{k}={v:.3f}" for k, v in row["ms"].items() if v)
        print(w.name, ms, row["same_as_first"], flush=True)
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
