"""Sweep the bundled norms' cache hints and rows per program on the H200 (bf16).

``nodice/kernels/rmsnorm.py`` and ``add_rmsnorm.py`` ship ``STREAMING_HINTS`` off (evict-first
loads of the rows, streaming stores, evict-last weight when on). ``sweep_pins.py``: the shipped
kernel (``reference`` = ``shipped``), the libraries (torch, Liger), and each table on every
workload, in the same process; the issue's bar is 90 % of the copy bandwidth at prefill sizes.
The hints and rows per program change no value (tested bit for bit under the interpreter), so
every table is a batch-invariant kernel.

    python3 lab/candidates/sweep_norm_hints.py --out $OUT/sweep_norm_hints.jsonl [--seconds 150]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

_TABLES = [
    {"STREAMING_HINTS": 1, "ROW_ELEMENTS": 2048},
    {"STREAMING_HINTS": 1, "ROW_ELEMENTS": 8192},
    {"STREAMING_HINTS": 0, "ROW_ELEMENTS": 8192},
    {"STREAMING_HINTS": 1, "ROW_ELEMENTS": 16384},
    {"STREAMING_HINTS": 0, "ROW_ELEMENTS": 4096},
]

PLAN = [
    Sweep(
        task,
        ROOT / "nodice" / "kernels" / f"{task}.py",
        "shipped",
        ROOT / "nodice" / "kernels" / f"{task}.py",
        lambda: [dict(t) for t in _TABLES],
        reference_pins={"STREAMING_HINTS": 0},
    )
    for task in ("rmsnorm", "add_rmsnorm")
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
