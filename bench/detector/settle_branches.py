"""The candidates whose static findings the full gate hands to the dynamic stage, and what it does with them.

    python3 bench/detector/settle_branches.py [--pool bench/detector] [--device cpu] [--json OUT]

Static analysis rejects a batch-dependent choice between algorithms
(``algorithm_selection_by_batch``) on its own; the full gate instead runs dynamic validation with
the branch watched (``nodice.gate.branches``) and rejects unless both sides ran without a change of
bits. Only the candidates whose every static violation is such a choice can change verdict, so this
runs the full gate (the call ``nodice bench detector`` makes for its full configuration, seed 0) on
those alone, in one process, and prints each one's label and verdict: a violating candidate that
passes here is detection the change costs; an invariant one that passes is a false rejection saved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from nodice.bench.detector.pool import default_root, load_pool
from nodice.gate.branches import confirmable
from nodice.gate.pipeline import check


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pool", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    pool = load_pool(args.pool or default_root())
    rows = []
    for entry in pool.entries:
        label = entry.label(args.device)
        if label not in ("violating", "invariant"):
            continue
        path = pool.path_of(entry)
        static = check(
            path, entry.spec.task, device=args.device, static=True, correctness=False, dynamic=False
        )
        violations = [f for f in static.findings if f.severity == "violation"]
        if not violations or not all(confirmable(f) for f in violations):
            continue
        t0 = time.perf_counter()
        r = check(path, entry.spec.task, device=args.device, seed=args.seed)
        row = {
            "key": entry.spec.key,
            "label": label,
            "verdict": r.verdict,
            "reason": r.reason[:200],
            "stages": {s.name: s.verdict for s in r.stages},
            "dynamic": next((s.stats for s in r.stages if s.name == "dynamic"), {}),
            "s": round(time.perf_counter() - t0, 1),
        }
        rows.append(row)
        print(f"{label:9s} {r.verdict:12s} {row['s']:6.1f}s  {entry.spec.key}  {r.reason[:110]}", flush=True)
    bad = [r for r in rows if r["label"] == "violating"]
    good = [r for r in rows if r["label"] == "invariant"]
    print(
        f"{len(rows)} candidates settled by the dynamic stage: violating still rejected "
        f"{sum(r['verdict'] != 'pass' for r in bad)}/{len(bad)}, "
        f"invariant now passing {sum(r['verdict'] == 'pass' for r in good)}/{len(good)}"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"device": args.device, "seed": args.seed, "rows": rows}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
