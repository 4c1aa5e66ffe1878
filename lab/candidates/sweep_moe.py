"""Sweep the bundled MoE kernel's tiles against the seed and the grouped-GEMM baselines (GPU, bf16).

The seed (``nodice/examples/moe/seed.py``), the task's library baselines, and the bundled kernel
(``nodice/kernels/moe.py``, written here as ``moe_tiles.py``) under each setting
(``sweep_pins.py``): its own pins first, then every tile height, column block and launch setting,
each for every batch. (The first sweep, 2026-12-02, also tried a height chosen from the expected
rows per active expert; 64 rows for every batch was faster, and the rule was dropped.)

    python3 lab/candidates/sweep_moe.py --out $OUT/sweep_moe.jsonl [--seconds 200]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main


def _tables() -> list[dict[str, object]]:
    heights = (64, 128, 32, 16)
    columns = (64, 128)
    launch = ((4, 3), (8, 3), (4, 4), (8, 4))
    return [
        {
            "BLOCK_M": height,
            "BLOCK_N": bn,
            "GATE_UP_WARPS": warps,
            "GATE_UP_STAGES": stages,
            "DOWN_WARPS": warps,
            "DOWN_STAGES": stages,
        }
        for (warps, stages), bn, height in itertools.product(launch, columns, heights)
    ]


SEED = ROOT / "nodice" / "examples" / "moe" / "seed.py"
PLAN = [Sweep("moe", SEED, "seed", ROOT / "nodice" / "kernels" / "moe.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
