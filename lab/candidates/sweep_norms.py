"""Sweep the persistent norm candidates against the bundled kernels and the libraries (GPU, bf16).

For rmsnorm and add_rmsnorm: the bundled kernel (``nodice/kernels/<task>.py``), every library
baseline that loads, and ``<task>_persistent.py`` under each pin table (``sweep_pins.py``).

    python3 lab/candidates/sweep_norms.py --out $OUT/sweep_norms.jsonl [--seconds 150]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main


def _tables() -> list[dict[str, int]]:
    return [
        {"PROGRAMS_PER_SM": p, "STAGES": s, "ROW_ELEMENTS": r}
        for p, s, r in itertools.product((4, 2, 8, 1), (2, 3, 1), (2048, 8192))  # likeliest first
    ]


PLAN = [
    Sweep(task, ROOT / "nodice" / "kernels" / f"{task}.py", "bundled", f"{task}_persistent.py", _tables)
    for task in ("rmsnorm", "add_rmsnorm")
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
