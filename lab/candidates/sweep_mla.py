"""Sweep the wide MLA decode candidate against the seed and FlashInfer MLA (GPU, bf16).

The seed (``nodice/examples/mla_decode/seed.py``), every library baseline that loads, and
``mla_decode_wide.py`` under each pin table (``sweep_pins.py``), on every ``mla_decode`` workload.

    python3 lab/candidates/sweep_mla.py --out $OUT/sweep_mla.jsonl [--seconds 200]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main


def _tables() -> list[dict[str, int]]:
    # The pins most likely to matter first: the split size and the value-column parts.
    return [
        {"SPLIT_TOKENS": split, "V_PARTS": parts, "BLOCK_N": bn, "NUM_WARPS": warps, "NUM_STAGES": stages}
        for split, parts, bn, warps, stages in itertools.product(
            (1024, 512, 2048), (2, 1, 4), (32, 64), (8, 4), (2, 1)
        )
    ]


PLAN = [
    Sweep(
        "mla_decode",
        ROOT / "nodice" / "examples" / "mla_decode" / "seed.py",
        "seed",
        "mla_decode_wide.py",
        _tables,
    )
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
