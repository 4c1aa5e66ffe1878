"""Sweep the bundled sampling kernel's chunk and warps against the seed and the sampling baselines.

The seed (``nodice/examples/sampling/seed.py``), the task's library baselines (FlashInfer's
top-k/top-p sampling, torch's per-request multinomial), and the per-request kernel
(``sampling_per_request.py``, the bundled kernel until 2026-12-04) under each setting: its own
pins first, then every chunk width
``MAX_BLOCK_V`` (logits per loop step of a request's program) and warp count, each for every batch.
One program holds one request at real vocabularies, so the chunk sets how many loads are in
flight per step of every pass: the question is how much of a pass is latency.

    python3 lab/candidates/sweep_sampling.py --out $OUT/sweep_sampling.jsonl [--seconds 150]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main


def _tables() -> list[dict[str, object]]:
    return [
        {"MAX_BLOCK_V": block, "NUM_WARPS": warps}
        for block, warps in itertools.product((8192, 16384, 4096, 2048), (16, 8, 32, 4))
        if block // (32 * warps) in (4, 8, 16, 32)
    ]


SEED = ROOT / "nodice" / "examples" / "sampling" / "seed.py"
PLAN = [Sweep("sampling", SEED, "seed", "sampling_per_request.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
