"""One table per candidate from the gate's JSON (``$OUT/check_<name>.json``) and the smoke/sweep files.

python3 lab/candidates/summarize.py OUT_DIR
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def geomean(values: list[float]) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def gate_table(path: Path) -> None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"## {path.stem}: no readable JSON ({exc})")
        return
    print(
        f"## {path.stem.removeprefix('check_')}: verdict={data.get('verdict')} geomean={data.get('geomean')}"
    )
    if data.get("reason"):
        print(f"   reason: {data['reason']}")
    stages = data.get("stages") or {}
    # `nodice check --json` keys the stages by name.
    items = stages.items() if isinstance(stages, dict) else ((s.get("name"), s) for s in stages)
    for name, stage in items:
        print(f"   stage {name}: {stage.get('verdict')} {stage.get('ms')} ms {stage.get('detail') or ''}")
    scores = data.get("scores") or []
    if not scores:
        return
    names = sorted({b for s in scores for b in (s.get("baselines") or {})})
    print("   | workload | candidate | " + " | ".join(names) + " | × best |")
    per_baseline: dict[str, list[float]] = {n: [] for n in names}
    for s in scores:
        cells = []
        for n in names:
            b = (s.get("baselines") or {}).get(n) or {}
            per_baseline[n].append(b.get("throughput") or 0.0)
            cells.append(f"{b.get('throughput', 0):.4g} ({b.get('bi') or '?'})" if b else "—")
        ratio = s.get("ratio_best")
        ratio_cell = f"{ratio:.2f}" if ratio else "—"
        print(
            f"   | {s.get('workload')} | {s.get('throughput', 0):.4g} | "
            + " | ".join(cells)
            + f" | {ratio_cell} |"
        )
    print(
        "   | geomean | "
        + f"{geomean([s.get('throughput', 0) for s in scores]):.4g} | "
        + " | ".join(f"{geomean(v):.4g}" for v in per_baseline.values())
        + " | |"
    )


def smoke_table(path: Path) -> None:
    if not path.exists():
        return
    data = json.loads(path.read_text())
    print(f"## {path.name}")
    for name, entry in data.get("candidates", {}).items():
        status = "FAIL " + "; ".join(entry.get("errors", [])[:2]) if entry.get("errors") else "ok"
        print(f"   {name}: {status}")
        for label, rows in entry.get("throughput", {}).items():
            cells = ", ".join(f"{w}={v}" for w, v in rows.items())
            print(f"      {label}: {cells}")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for path in sorted(out.glob("smoke_*.json")):
        smoke_table(path)
    for path in sorted(out.glob("check_*.json")):
        gate_table(path)
    smoke_table(out / "sweep.json")


if __name__ == "__main__":
    main()
