"""Sweep the M-bucketed GEMM candidate's tiles against the seed and cuBLAS (GPU, bf16).

The seed (``nodice/examples/gemm/seed.py``), the task's library baselines, and ``gemm_tiles.py``
with each tile setting applied to every M (``sweep_pins.py``: one row per setting and workload),
so that the table's buckets can be read off per M afterwards. Pointer loads and TMA loads alike.

    python3 lab/candidates/sweep_gemm.py --out $OUT/sweep_gemm.jsonl [--seconds 200]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

# (BLOCK_M, BLOCK_N, num_warps, num_stages, TMA settings tried). The candidate's own rules run
# first (the sweep's "original" setting). The first sweep (2026-12-02) tried the 64/128/256-row
# tiles at their usual depths; this one looks closer at decode (narrow, deep) and mid-size M.
_TILES = [
    (64, 16, 4, 8, (1, 0)),
    (64, 32, 4, 8, (1, 0)),
    (64, 64, 4, 8, (1, 0)),
    (64, 16, 4, 5, (1, 0)),
    (64, 32, 4, 6, (1, 0)),
    (64, 64, 4, 5, (1, 0)),
    (64, 128, 4, 6, (1, 0)),
    (64, 256, 4, 4, (1,)),
    (128, 128, 8, 5, (1,)),
    (128, 128, 4, 5, (1,)),
    (128, 256, 8, 3, (1,)),
    (128, 256, 8, 4, (1,)),
    (256, 128, 8, 4, (1,)),
]


def _tables() -> list[dict[str, object]]:
    return [
        {"USE_TMA": tma, "TILES": [[1 << 62, bm, bn, 8, warps, stages]]}
        for bm, bn, warps, stages, tmas in _TILES
        for tma in tmas
    ]


PLAN = [Sweep("gemm", ROOT / "nodice" / "examples" / "gemm" / "seed.py", "seed", "gemm_tiles.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
