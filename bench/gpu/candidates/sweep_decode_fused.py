"""Sweep the one-launch paged-decode candidate's pins against the bundled kernel and the baselines (GPU).

The bundled kernel (``nodice/kernels/attention_decode.py``, two launches) is the reference; then
the task's library baselines (FlashInfer decode with a fixed split and without one, SDPA over
gathered pages) and ``decode_fused.py`` (the combine folded into the split kernel by the last
split to arrive) in bf16 under each pin table: its own pins first, then split size 512 / 1024
with and without the long-request rule (a longer split for requests longer than
LONG_FROM_TOKENS_D128, chosen from the request's own length; LONG_SPLIT_TOKENS_D128 = 0 turns it
off), key tiles of 64 / 128, 3 / 4 pipeline stages and the fold's tile (SPLIT_TILE splits a step;
``sweep_pins.py``: one row per setting and workload). Every pin follows the head dim or the
request's own length, never the batch, so any row of the table is a batch-invariant kernel.

    python3 bench/gpu/candidates/sweep_decode_fused.py --out $OUT/sweep_decode_fused.jsonl [--seconds 150]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

# (BLOCK_N, SPLIT_TOKENS, num_warps, num_stages, LONG_SPLIT_TOKENS, LONG_FROM_TOKENS, SPLIT_TILE),
# likeliest first. LONG_SPLIT_TOKENS 0: every request splits every SPLIT_TOKENS tokens.
_PINS = [
    (64, 512, 4, 3, 0, 16384, 16),
    (64, 1024, 4, 3, 0, 16384, 16),
    (64, 512, 4, 3, 2048, 16384, 16),
    (64, 512, 4, 3, 1024, 4096, 16),
    (64, 1024, 4, 3, 2048, 16384, 16),
    (128, 512, 4, 3, 0, 16384, 16),
    (128, 1024, 4, 3, 2048, 16384, 16),
    (64, 512, 4, 4, 1024, 16384, 16),
    (64, 1024, 4, 4, 0, 16384, 16),
    (64, 512, 4, 3, 1024, 16384, 32),
    (128, 512, 8, 3, 1024, 16384, 16),
]


def _tables() -> list[dict[str, int]]:
    return [
        {
            "BLOCK_N_D128": n,
            "SPLIT_TOKENS_D128": s,
            "NUM_WARPS_D128": w,
            "NUM_STAGES_D128": st,
            "LONG_SPLIT_TOKENS_D128": ls,
            "LONG_FROM_TOKENS_D128": lf,
            "SPLIT_TILE": tile,
        }
        for n, s, w, st, ls, lf, tile in _PINS
    ]


PLAN = [
    Sweep(
        "attention_decode",
        ROOT / "nodice" / "kernels" / "attention_decode.py",
        "bundled",
        "decode_fused.py",
        _tables,
    )
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
