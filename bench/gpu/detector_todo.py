"""The keys of a pool's candidates that have no current label for a device, one per line.

    python3 bench/gpu/detector_todo.py --pool POOL --labels labels.json --device cuda [--task T …]

Used by ``bench/gpu/detector.sh`` so that calls resume each other: a label the oracle already wrote
(for the file as it is now) is not recomputed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nodice.bench.detector.pool import load_pool


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", type=Path, required=True)
    ap.add_argument("--labels", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--task", action="append", default=[])
    args = ap.parse_args()
    pool = load_pool(args.pool, args.labels)
    for e in pool.entries:
        if (not args.task or e.spec.task in args.task) and e.label(args.device) is None:
            print(e.spec.key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
