"""Gather what bench/gpu/compare.sh wrote so far into one JSON file, with a summary over the tasks.

    python3 bench/gpu/compare_collect.py OUT_DIR

Reads OUT_DIR/compare.jsonl (one line per task: its status, budgets and wall times) and
OUT_DIR/compare/<task>.json (`nodice compare --json`), writes OUT_DIR/compare.json atomically.
Summary, over the tasks whose status is ok (both runs made evaluations and the comparison
finished): the geometric mean of the speedup retention over the tasks that have one, and per mode
the BI pass rate of the best versions and the intervention rate pooled over every task's runs.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def collect(out: Path) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    lines = (out / "compare.jsonl").read_text().splitlines() if (out / "compare.jsonl").is_file() else []
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        figures = out / "compare" / f"{entry['task']}.json"
        # Only a task whose runs both made evaluations and whose comparison finished counts.
        if entry.get("status") == "ok" and figures.is_file():
            try:
                entry["compare"] = json.loads(figures.read_text())
            except json.JSONDecodeError as exc:
                entry["compare_error"] = f"unreadable {figures.name}: {exc}"
        tasks[entry["task"]] = entry
    compared = [t["compare"] for t in tasks.values() if "compare" in t]
    summary: dict[str, Any] = {
        "tasks_compared": len(compared),
        "speedup_retention_geomean": _geomean([c["speedup_retention"] or 0.0 for c in compared]),
    }
    for key, mode in (("a", "bi"), ("b", "vanilla")):
        runs = [c["runs"][key] for c in compared]
        best = [r["best_verdict"] for r in runs if r["best_verdict"] is not None]
        evaluations = sum(r["evaluations"] for r in runs)
        summary[mode] = {
            "best_versions_judged": len(best),
            "best_bi_pass_rate": sum(v == "pass" for v in best) / len(best) if best else None,
            "evaluations": evaluations,
            "bi_rejections": sum(r["bi_rejections"] for r in runs),
            "intervention_rate": sum(r["bi_rejections"] for r in runs) / evaluations if evaluations else None,
        }
    meta_file = out / "compare_meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    return {**meta, "summary": summary, "tasks": tasks}


def main() -> None:
    out = Path(sys.argv[1])
    data = collect(out)
    fd, tmp = tempfile.mkstemp(prefix=".compare.", dir=out)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, out / "compare.json")
    s = data["summary"]
    print(
        f"compare.json: {s['tasks_compared']} task(s) compared; retention geomean "
        f"{s['speedup_retention_geomean']}; best BI pass rate bi {s['bi']['best_bi_pass_rate']} "
        f"vanilla {s['vanilla']['best_bi_pass_rate']}; intervention rate bi {s['bi']['intervention_rate']}"
    )


if __name__ == "__main__":
    main()
