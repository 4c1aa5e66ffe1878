"""The MHA → GQA transfer of an evolved attention kernel, timed: what ``lab/scripts/transfer.sh`` reports.

    python3 lab/scripts/transfer.py best RUN_DIR OUT_FILE       # the best version's kernel of a run
    python3 lab/scripts/transfer.py summary RUN_A RUN_B OUT.json  # the two phases, timed

Phase A evolves the kernel on one set of workloads (the MHA layouts), phase B starts from A's best
and evolves it on another (the GQA layouts). The summary gives, per phase, the evaluations and
commits, the seed's and the best version's geomean and ratio to the fastest baseline, and for B the
wall time from its first evaluation to its best version and to the first version at least as close
to the baselines as A's best was (None when B never got there): AVO's "transfer time"; and the
same within the timing spread of one kernel (1 %), since A's best is itself one timed sample.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from nodice.evolution.lineage import Lineage
from nodice.evolution.rundir import RunDir


def best_kernel(run_dir: Path) -> str:
    lineage = Lineage(run_dir)
    versions = lineage.versions()
    rev = versions[-1].sha if versions else lineage.root_commit()
    return lineage.show(rev, "workspace/kernel.py")


def phase(run_dir: Path) -> dict[str, Any]:
    versions = Lineage(run_dir).versions()
    config = RunDir(run_dir).load_config()
    import sqlite3

    with sqlite3.connect(run_dir / "results.sqlite") as db:
        created = [c for (c,) in db.execute("SELECT created FROM evolution_attempts ORDER BY id")]
    seed, best = (versions[0], versions[-1]) if versions else (None, None)
    # Seconds from the seed's commit: the seed itself is at 0 (the journal's first attempt is
    # written a moment before the lineage's first commit, by a margin the machine's load sets).
    start = seed.created if seed is not None else (min(created) if created else None)

    def since(t: float | None) -> float | None:
        return None if t is None or start is None else round(t - start, 1)

    return {
        "run_dir": run_dir.name,
        "workloads": config.workloads,
        "evaluations": len(created),
        "commits": len(versions),
        "seed": None if seed is None else {"geomean": seed.geomean, "ratio_best": seed.ratio_best},
        "best": None
        if best is None
        else {
            "version": best.version,
            "geomean": best.geomean,
            "ratio_best": best.ratio_best,
            "s_after_start": since(best.created),
        },
        "unit": config.unit,
        "versions": [
            {"version": v.version, "geomean": v.geomean, "ratio_best": v.ratio_best, "s": since(v.created)}
            for v in versions
        ],
    }


# Timing spread between evaluations of the same kernel (H200, attention prefill: about ±1 % on the
# geomean): reaching A's ratio "within" it counts as reaching it, reported beside the strict figure.
WITHIN = 0.01


def _first_at(b: dict[str, Any], level: float | None) -> float | None:
    if level is None:
        return None
    reached = (v["s"] for v in b["versions"] if v["ratio_best"] is not None and v["ratio_best"] >= level)
    return next(reached, None)


def summary(run_a: Path, run_b: Path) -> dict[str, Any]:
    a, b = phase(run_a), phase(run_b)
    target = (a["best"] or {}).get("ratio_best")
    return {
        "a": a,
        "b": b,
        "target_ratio": target,
        "b_s_to_target": _first_at(b, target),
        "within": WITHIN,
        "b_s_to_within": _first_at(b, None if target is None else target * (1 - WITHIN)),
    }


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "best":
        Path(argv[3]).write_text(best_kernel(Path(argv[2])), encoding="utf-8")
        return 0
    if len(argv) == 5 and argv[1] == "summary":
        out = summary(Path(argv[2]), Path(argv[3]))
        Path(argv[4]).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(json.dumps({k: out[k] for k in ("target_ratio", "b_s_to_target", "b_s_to_within")} | {
            p: {k: out[p][k] for k in ("evaluations", "commits", "seed", "best")} for p in ("a", "b")
        }, indent=1))  # fmt: skip
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
