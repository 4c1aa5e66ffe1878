"""Sweep the two-launch paged-decode kernel's pins against the seed and the decode baselines (GPU, bf16).

The seed (``nodice/examples/attention_decode/seed.py``), the task's library baselines (FlashInfer
decode with a fixed split and without one, SDPA over gathered pages), and the two-launch kernel
(``attention_decode_two_launch.py``, bundled until 2026-12-04) under each pin table: its own pins
first, then key tile, split size, warps and pipeline depth for head dim 128 (``sweep_pins.py``: one
row per setting and workload). Every pin follows the head dim, never the batch, so any row of the
table is a batch-invariant kernel; the question is which one streams the cache fastest at B·KV ≥
8·8K, where the issue asks for 80 % of copy bandwidth.

    python3 lab/candidates/sweep_decode.py --out $OUT/sweep_decode.jsonl [--seconds 150]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

# (BLOCK_N, SPLIT_TOKENS, num_warps, num_stages), likeliest first.
_PINS = [
    (64, 1024, 4, 3),
    (128, 1024, 4, 3),
    (128, 512, 4, 3),
    (64, 512, 4, 4),
    (64, 1024, 4, 4),
    (128, 1024, 8, 3),
    (64, 2048, 4, 3),
    (128, 2048, 4, 3),
    (32, 512, 4, 4),
    (64, 256, 4, 3),
    (128, 1024, 4, 2),
    (64, 512, 8, 3),
]


def _tables() -> list[dict[str, int]]:
    return [
        {"BLOCK_N_D128": n, "SPLIT_TOKENS_D128": s, "NUM_WARPS_D128": w, "NUM_STAGES_D128": st}
        for n, s, w, st in _PINS
    ]


PLAN = [
    Sweep(
        "attention_decode",
        ROOT / "nodice" / "examples" / "attention_decode" / "seed.py",
        "seed",
        "attention_decode_two_launch.py",
        _tables,
    )
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
