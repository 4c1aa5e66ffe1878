"""Sweep the M-bucketed GEMM candidate's tiles against the seed and cuBLAS (GPU, bf16).

The seed (``nodice/examples/gemm/seed.py``), the task's library baselines, and ``gemm_tiles.py``
with each tile setting applied to every M (``sweep_pins.py``: one row per setting and workload),
so that the table's buckets can be read off per M afterwards. Pointer loads and TMA loads alike.

    python3 bench/gpu/candidates/sweep_gemm.py --out $OUT/sweep_gemm.jsonl [--seconds 200]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

# (BLOCK_M, BLOCK_N, num_warps, num_stages), likeliest first: decode-sized tiles, then prefill ones.
_TILES = [
    (64, 64, 4, 5),
    (128, 256, 8, 3),
    (64, 128, 4, 4),
    (128, 128, 8, 4),
    (64, 32, 4, 6),
    (256, 128, 8, 3),
    (128, 128, 8, 3),
    (64, 256, 4, 3),
    (128, 64, 4, 4),
    (128, 128, 4, 4),
]


def _tables() -> list[dict[str, object]]:
    return [
        {"USE_TMA": tma, "TILES": [[1 << 62, bm, bn, 8, warps, stages]]}
        for bm, bn, warps, stages in _TILES
        for tma in (1, 0)
    ]


PLAN = [Sweep("gemm", ROOT / "nodice" / "examples" / "gemm" / "seed.py", "seed", "gemm_tiles.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
