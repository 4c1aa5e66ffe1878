"""Sweep the chunked gated delta net candidate against the seed and fla (GPU, bf16).

The seed (``nodice/examples/gdn/seed.py``, the recurrence token by token), every library
baseline that loads (fla's ``chunk_gated_delta_rule``), and the bundled chunked kernel
(``nodice/kernels/gdn.py``) under each pin table (``sweep_pins.py``), on every ``gdn``
workload. A table fixes the chunk size for every workload it runs on, as the kernel does for
every batch.

    python3 lab/candidates/sweep_gdn.py --out $OUT/sweep_gdn.jsonl [--seconds 200]
"""

from __future__ import annotations

import itertools
import sys

from sweep_pins import ROOT, Sweep, main

# Each pin's values, the candidate's own setting first.
_PINS: dict[str, tuple[int, ...]] = {
    "CHUNK": (64, 32),
    "STATE_BLOCK_V": (64, 32, 16),
    "OUTPUT_BLOCK_V": (64, 128),
    "PREPARE_WARPS": (4, 8),
    "STATE_WARPS": (4, 8),
    # 1 stage faults (illegal memory access) on the H200 with Triton 3.6: left out.
    "STATE_STAGES": (2, 3),
    "OUTPUT_WARPS": (4, 8),
    "INVERSE_SUB": (16, 32),
}


def _tables() -> list[dict[str, int]]:
    """One pin moved at a time from the candidate's settings (likeliest to matter first: the
    chunk, then the state walk's value block, which sets the walk's B·Hh·Dv/BLOCK_V
    programs), then the rest of the grid while time lasts."""
    base = {name: values[0] for name, values in _PINS.items()}
    tables = [{**base, name: value} for name, values in _PINS.items() for value in values[1:]]
    for combo in itertools.product(*_PINS.values()):
        table = dict(zip(_PINS, combo, strict=True))
        if table != base and table not in tables:
            tables.append(table)
    return tables


SEED = ROOT / "nodice" / "examples" / "gdn" / "seed.py"
PLAN = [Sweep("gdn", SEED, "seed", ROOT / "nodice" / "kernels" / "gdn.py", _tables)]

if __name__ == "__main__":
    sys.exit(main(PLAN))
