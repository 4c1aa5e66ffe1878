"""Sweep the one-launch paged-decode kernel's pins against the two-launch kernel and the baselines (GPU).

The two-launch kernel (``attention_decode_two_launch.py``, the bundled kernel until 2026-12-04) is
the reference; then the task's library baselines (FlashInfer decode with a fixed split and without
one, SDPA over gathered pages) and the bundled kernel (``nodice/kernels/attention_decode.py``: the
combine folded into the split kernel by the last split to arrive) in bf16 under each pin table: its
own pins first, then split size 512 / 1024 with and without the long-request rule (a longer split
for requests longer than LONG_FROM_TOKENS_D128, chosen from the request's own length;
LONG_SPLIT_TOKENS_D128 = 0 turns it off), key tiles of 64 / 128, 3 / 4 pipeline stages, the fold's
tile (SPLIT_TILE splits a step) and the query heads folded side by side (FOLD_HEADS; 1 is the first
version's head-by-head fold) (``sweep_pins.py``: one row per setting and workload). Every pin
follows the head dim or the request's own length, never the batch, so any row of the table is a
batch-invariant kernel.

    python3 lab/candidates/sweep_decode_fused.py --out $OUT/sweep_decode_fused.jsonl [--seconds 150]
"""

from __future__ import annotations

import sys

from sweep_pins import ROOT, Sweep, main

# (BLOCK_N, SPLIT_TOKENS, num_warps, num_stages, LONG_SPLIT_TOKENS, LONG_FROM_TOKENS, SPLIT_TILE,
# FOLD_HEADS), likeliest first. LONG_SPLIT_TOKENS 0: every request splits every SPLIT_TOKENS tokens.
# FOLD_HEADS: query heads folded side by side (1: head by head, the first version's fold); it moves
# the kernel's register count (sm_90 compile, D 128, 4 warps: BLOCK_N 64 about 72-96 / 128 / 150
# / 218 at 1 / 2 / 4 / 8 heads, BLOCK_N 128 about 128 / 165 / 195 / 225), never the result.
_PINS = [
    # Round 4: the bundled pins (key tile 128, 512-token splits, no long rule, SPLIT_TILE 16, 4 heads
    # folded) run first as the sweep's own setting. Nsight Compute (lab/results/h200_2026-12-04/
    # callO) found them held to two programs per SM by registers (224 on Triton 3.6) and 1.94 waves
    # at B = 8, 8K tokens, 4 KV heads; these cut registers (compile_sm90.py --only
    # attention_decode_fused --sweep, Triton 3.9: 194 as bundled, 164-166 with an 8-split combine
    # tile or 2 heads folded, 128 with both or with 1 head; 74 KB of shared memory allows three per
    # SM, the 64-key tile's 39 KB five). Rounds 1-3: callB, callF, callG of 2026-12-04.
    (128, 512, 4, 3, 0, 16384, 8, 4),
    (128, 512, 4, 3, 0, 16384, 16, 2),
    (128, 512, 4, 3, 0, 16384, 8, 2),
    (128, 512, 4, 3, 0, 16384, 16, 1),
    (128, 512, 4, 2, 0, 16384, 8, 2),
    (64, 512, 4, 3, 0, 16384, 8, 2),
    (128, 256, 4, 3, 0, 16384, 16, 4),
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
            "FOLD_HEADS": fh,
        }
        for n, s, w, st, ls, lf, tile, fh in _PINS
    ]


PLAN = [
    Sweep(
        "attention_decode",
        ROOT / "lab" / "candidates" / "attention_decode_two_launch.py",
        "two_launch",
        ROOT / "nodice" / "kernels" / "attention_decode.py",
        _tables,
    )
]

if __name__ == "__main__":
    sys.exit(main(PLAN))
