"""The static stage alone over the detector pool: detection and false rejection against the labels.

    python3 bench/detector/static_only.py [--device cpu] [--pool bench/detector]

Runs ``nodice.gate.pipeline.check`` with only the static stage (the same call `nodice bench
detector` makes for its static configuration) on every candidate that has a current label for the
device, in one process: about ten milliseconds a candidate, so it can be rerun after any change to
the analyzer. Prints the two rates and the candidates on the wrong side.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nodice.bench.detector.pool import default_root, load_pool
from nodice.gate.pipeline import check


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pool", type=Path, default=None)
    args = ap.parse_args()
    pool = load_pool(args.pool or default_root())
    found = missed = false = clean = 0
    wrong: list[str] = []
    for entry in pool.entries:
        label = entry.label(args.device)
        if label not in ("violating", "invariant"):
            continue
        r = check(
            pool.path_of(entry), entry.spec.task, device="cpu", static=True, correctness=False, dynamic=False
        )
        rejected = r.verdict in ("bi_violation", "cheat")
        if label == "violating":
            found, missed = found + rejected, missed + (not rejected)
            if not rejected:
                wrong.append(f"missed            {entry.spec.key}")
        else:
            false, clean = false + rejected, clean + (not rejected)
            if rejected:
                wrong.append(f"falsely rejected  {entry.spec.key}: {r.reason[:100]}")
    rates = f"detected {found}/{found + missed}, falsely rejected {false}/{false + clean}"
    print(f"static stage, {args.device} labels: {rates}")
    print("\n".join(wrong))
    return 0


if __name__ == "__main__":
    sys.exit(main())
