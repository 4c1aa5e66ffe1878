"""Sweep the bundled GEMM's path pins on the H200 (bf16), after a bitwise check.

``nodice/kernels/gemm.py`` has pins that choose how a product is walked, none of which may change
a bit: ``SINGLE_POINTER_LOADS`` (pointer loads for M ≤ 16; on since this sweep's run of
2026-12-04), ``SINGLE_PTR_NARROWEST_MIN_TILES`` (16-column tiles where 32 columns leave too few
tiles; off), ``DECODE_POINTER_LOADS`` (the same pointer-load tiles for 16 < M ≤ 64; off) and
``CHAINED_SPLITS`` (K walked in chained segments where tiles leave SMs idle; off: the run of
2026-12-04 timed it slower, lab/results/h200_2026-12-04/callJ/, so its tables are gone). First,
on every layer of the task, products of M = 1, 8, 16, 17, 64, 65, 512, 513 and 4096 rows under each
table below are compared bitwise with every pin off, the plain TMA path (one ``"impl": "bi"`` line
per table and layer; the sweep stops if any differs). Then ``sweep_pins.py``: the shipped kernel
(``reference`` = ``shipped``), cuBLAS, the file's own pins on every workload and each table on the
workloads it can change (M ≤ 64).

    python3 lab/candidates/sweep_gemm_pins.py --out $OUT/sweep_gemm_pins.jsonl [--seconds 200]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch
from sweep_pins import ROOT, Sweep, _load, main

from nodice.tasks import get_task

BUNDLED = ROOT / "nodice" / "kernels" / "gemm.py"
OFF = {
    "SINGLE_POINTER_LOADS": 0,
    "CHAINED_SPLITS": 0,
    "SINGLE_PTR_NARROWEST_MIN_TILES": 0,
    "DECODE_POINTER_LOADS": 0,
}
# Likeliest first. Nsight Compute (callO) found M = 1 of the long-K layers on 80 programs for 132 SMs
# and M = 64 of the 4096-wide ones on 64: more, narrower column tiles.
TABLES: list[dict[str, Any]] = [
    {"SINGLE_POINTER_LOADS": 1, "SINGLE_PTR_NARROWEST_MIN_TILES": 256, "SINGLE_PTR_MIN_TILES": 256},
    {"SINGLE_POINTER_LOADS": 1, "SINGLE_PTR_NARROWEST_MIN_TILES": 256},
    {"SINGLE_POINTER_LOADS": 1, "DECODE_POINTER_LOADS": 1},
    {
        "SINGLE_POINTER_LOADS": 1,
        "DECODE_POINTER_LOADS": 1,
        "SINGLE_PTR_NARROWEST_MIN_TILES": 256,
        "SINGLE_PTR_MIN_TILES": 256,
    },
    {
        "SINGLE_POINTER_LOADS": 1,
        "SINGLE_PTR_NARROWEST_MIN_TILES": 256,
        "SINGLE_PTR_MIN_TILES": 256,
        "SINGLE_PTR_NARROWEST_STAGES": 4,
    },
    {
        "SINGLE_POINTER_LOADS": 1,
        "SINGLE_PTR_NARROWEST_MIN_TILES": 256,
        "SINGLE_PTR_MIN_TILES": 256,
        "SINGLE_PTR_NARROWEST_STAGES": 6,
    },
    {"SINGLE_POINTER_LOADS": 1, "SINGLE_PTR_NARROWEST_MIN_TILES": 396, "SINGLE_PTR_MIN_TILES": 396},
    {"SINGLE_POINTER_LOADS": 1, "SINGLE_PTR_MIN_TILES": 128, "SINGLE_PTR_NARROWEST_MIN_TILES": 264},
]
ROWS = (1, 8, 16, 17, 64, 65, 512, 513, 4096)


def _tables() -> list[dict[str, Any]]:
    shipped = _load(BUNDLED, "gemm_shipped_pins")
    keys = sorted({k for t in TABLES for k in t})
    return [{k: getattr(shipped, k) for k in keys} | t for t in TABLES]


def bitwise_check(out_path: str) -> bool:
    """Each table against the shipped pins, bitwise, on every layer. True when all matched."""
    shipped = _load(BUNDLED, "gemm_bitwise_shipped")
    for k, v in OFF.items():  # the reference is the plain path, whatever the file ships
        setattr(shipped, k, v)
    cand = _load(BUNDLED, "gemm_bitwise_table")
    task = get_task("gemm")
    layers = sorted({(w.params["K"], w.params["N"]) for w in task.workloads()})
    gen = torch.Generator(device="cuda").manual_seed(0)
    ok = True
    with open(out_path, "a") as out:
        for k, n in layers:
            b = (torch.randn((k, n), generator=gen, device="cuda") / k**0.5).to(torch.bfloat16)
            a = torch.randn((max(ROWS), k), generator=gen, device="cuda").to(torch.bfloat16)
            want = {m: shipped.kernel(a[:m], b).view(torch.int16) for m in ROWS}
            for table in _tables():
                for key, value in table.items():
                    setattr(cand, key, value)
                differ = {m: int((cand.kernel(a[:m], b).view(torch.int16) != want[m]).sum()) for m in ROWS}
                same = not any(differ.values())
                ok &= same
                row = {"task": "gemm", "impl": "bi", "setting": table, "K": k, "N": n, "bitwise": same}
                row["elements_differ"] = {str(m): d for m, d in differ.items() if d}
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"gemm pins bitwise: {json.dumps(row)}", flush=True)
    return ok


PLAN = [
    Sweep(
        "gemm",
        BUNDLED,
        "shipped",
        BUNDLED,
        _tables,
        table_workloads=lambda w: w.params["M"] <= 64,
    )
]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    known, rest = ap.parse_known_args()
    if not bitwise_check(known.out):
        print("gemm pins: a table changed the output; the sweep is not run", flush=True)
        sys.exit(3)
    sys.argv = [sys.argv[0], "--out", known.out, *rest]  # the rest (--seconds) is sweep_pins'
    sys.exit(main(PLAN))
