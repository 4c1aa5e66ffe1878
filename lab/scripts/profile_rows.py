"""Hardware counters for the report rows that miss their targets: one kernel and one library baseline
on one workload, profiled by Nsight Compute (ncu) one call at a time.

Run under ncu, one case per process (``lab/scripts/profile_rows.sh`` does it for a list of cases):

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section LaunchStats \\
        --section Occupancy --csv --page details --log-file OUT.csv \\
        python3 lab/scripts/profile_rows.py --task gemm --workload qwen3-32b-down-decode-1 --impl nodice

``--impl nodice`` is the bundled kernel (``nodice/kernels/<task>.py``); any other value picks the
task's library baseline whose name contains it (``--impl cuBLAS``, ``--impl Liger``, ``--impl
"fixed split"``). The call is made three times outside the profiled range (compilation, plans,
caches) and once inside it (``cudaProfilerStart``/``Stop``), so ncu sees exactly the kernels of one
call. Then, without ncu:

    python3 lab/scripts/profile_rows.py --summarize OUT_DIR --json OUT_DIR/profiles.json

reads every ``*.csv`` that ncu wrote there into one JSON list: per case, per kernel, the duration,
DRAM/memory/SM throughput, achieved and theoretical occupancy, grid, registers, shared memory and
waves per SM.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# The metrics kept from ncu's sections, by the names its details page gives them.
KEEP = {
    "Duration": "duration",
    "DRAM Throughput": "dram_pct",
    "Memory Throughput": "memory_pct",
    "Compute (SM) Throughput": "sm_pct",
    "L2 Cache Throughput": "l2_pct",
    "Achieved Occupancy": "achieved_occupancy_pct",
    "Theoretical Occupancy": "theoretical_occupancy_pct",
    "Grid Size": "grid",
    "Block Size": "block",
    "Registers Per Thread": "registers",
    "Dynamic Shared Memory Per Block": "dynamic_smem",
    "Static Shared Memory Per Block": "static_smem",
    "Waves Per SM": "waves_per_sm",
    "Block Limit Registers": "block_limit_registers",
    "Block Limit Shared Mem": "block_limit_smem",
}


def _number(text: str) -> float | str:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """The kernels of one ncu ``--csv --page details`` log, in launch order, with the metrics of KEEP.

    Lines before the CSV header (ncu's ``==PROF==`` notes, the program's own output) are skipped. A
    metric is stored with its unit as ncu printed it (``duration`` and ``duration_unit``)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("ID") or row.get("Kernel Name") is None:
            continue
        k = kernels.setdefault(row["ID"], {"id": int(row["ID"]), "kernel": row["Kernel Name"]})
        key = KEEP.get(row.get("Metric Name", ""))
        if key and key not in k:
            k[key] = _number(row.get("Metric Value", ""))
            unit = row.get("Metric Unit", "")
            if unit and key == "duration":
                k["duration_unit"] = unit
    return sorted(kernels.values(), key=lambda k: k["id"])


def duration_us(kernel: dict[str, Any]) -> float | None:
    """A kernel's duration in microseconds, whatever unit ncu chose for it."""
    value = kernel.get("duration")
    if not isinstance(value, float):
        return None
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    return value * scale.get(str(kernel.get("duration_unit", "us")), 1.0)


def summarize(folder: Path) -> list[dict[str, Any]]:
    """One entry per ``<task>__<workload>__<impl>.csv`` in ``folder`` (the names profile_rows.sh
    writes): the case, its kernels and their summed duration."""
    cases = []
    for path in sorted(folder.glob("*.csv")):
        parts = path.stem.split("__")
        kernels = parse_ncu_csv(path.read_text(errors="replace"))
        times = [duration_us(k) for k in kernels]
        case: dict[str, Any] = {
            "case": path.stem,
            "task": parts[0] if len(parts) == 3 else None,
            "workload": parts[1] if len(parts) == 3 else None,
            "impl": parts[2] if len(parts) == 3 else None,
            "kernels": kernels,
            "total_us": sum(t for t in times if t is not None) if kernels else None,
        }
        if not kernels:
            case["error"] = "no kernel profiled (see the .csv: ncu's notes or the program's error)"
        cases.append(case)
    return cases


def _impl(task_name: str, impl: str, device: Any) -> Any:
    if impl == "nodice" or impl.endswith(".py"):
        import importlib.util

        # The bundled kernel, or a candidate file by its path from the repository root.
        path = ROOT / "nodice" / "kernels" / f"{task_name}.py" if impl == "nodice" else ROOT / impl
        if not path.is_file():
            raise SystemExit(f"profile_rows: no candidate file {impl}")
        spec = importlib.util.spec_from_file_location(f"profiled_{task_name}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.kernel
    from nodice.measuring.baselines import load_baselines

    loaded, missing = load_baselines(task_name, device)
    names = [n for n in [*loaded, *missing] if impl.lower() in n.lower()]
    if not names:
        raise SystemExit(f"profile_rows: no baseline of {task_name} matches {impl!r}: {[*loaded, *missing]}")
    if names[0] in missing:
        raise SystemExit(f"profile_rows: baseline {names[0]} is missing: {missing[names[0]]}")
    return loaded[names[0]]


def profile_one(task_name: str, workload: str, impl: str) -> None:
    import torch

    from nodice.measuring.throughput import timed_call, workload_args
    from nodice.tasks import get_task

    device = torch.device("cuda")
    task = get_task(task_name)
    ws = [w for w in task.workloads() if w.name == workload]
    if not ws:
        raise SystemExit(f"profile_rows: {task_name} has no workload {workload!r}")
    args = workload_args(task, ws[0], device, torch.bfloat16, 0)
    call = timed_call(_impl(task_name, impl, device), args)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task")
    ap.add_argument("--workload")
    ap.add_argument("--impl", default="nodice")
    ap.add_argument("--summarize", type=Path, help="a folder of ncu CSV logs to read")
    ap.add_argument("--json", type=Path, help="where --summarize writes its list")
    a = ap.parse_args(argv)
    if a.summarize:
        cases = summarize(a.summarize)
        text = json.dumps(cases, indent=1)
        if a.json:
            a.json.write_text(text + "\n")
        for c in cases:
            ks = c["kernels"]
            line = "; ".join(
                f"{k['kernel'][:40]} {duration_us(k) or 0:.1f} us dram {k.get('dram_pct', '?')}% "
                f"sm {k.get('sm_pct', '?')}% occ {k.get('achieved_occupancy_pct', '?')}% "
                f"grid {k.get('grid', '?')}"
                for k in ks
            )
            print(f"{c['case']}: {line or c.get('error')}")
        return 0
    if not (a.task and a.workload):
        ap.error("--task and --workload (or --summarize)")
    sys.path.insert(0, str(ROOT))
    profile_one(a.task, a.workload, a.impl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
