"""Sweep the MoE candidate's tiles against the seed and the grouped-GEMM baselines (GPU, bf16).

The seed (``nodice/examples/moe/seed.py``), the task's library baselines, and ``moe_tiles.py``
under each setting (``sweep_pins.py``): its own rule for the tile height first, then each height
pinned for every batch, so that the rule can be read off per workload afterwards.

    python3 bench/gpu/candidates/sweep_moe.py --out $OUT/sweep_moe.jsonl [--seconds 200]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main


def _tables() -> list[dict[str, object]]:
    heights = (None, 64, 128, 16, 32)  # the rule first
    columns = (64, 128)
    launch = ((4, 3), (8, 3), (4, 4), (8, 4))
    return [
        {
            "BLOCK_M_OVERRIDE": height,
            "BLOCK_N": bn,
            "GATE_UP_WARPS": warps,
            "GATE_UP_STAGES": stages,
            "DOWN_WARPS": warps,
            "DOWN_STAGES": stages,
        }
        for (warps, stages), bn, height in itertools.product(launch, columns, heights)
    ]


PLAN = [Sweep("moe", ROOT / "nodice" / "examples" / "moe" / "seed.py", "seed", "moe_tiles.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
