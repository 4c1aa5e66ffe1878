"""The kernel benchmark report as Markdown (for BENCHMARKS.md) and as terminal tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _num(v: Any) -> str:
    if v is None:
        return "—"
    v = float(v)
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def _ratio(v: Any) -> str:
    return "—" if v is None else f"{float(v):.2f}×"


def _pct(v: Any) -> str:
    return "—" if v is None else f"{float(v):.0%}"


def _baseline_names(entry: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for w in entry.get("workloads", []):
        names += [n for n in w.get("baselines", {}) if n not in names]
    return names


def _bi_label(entry: dict[str, Any], name: str) -> str:
    bi = (entry.get("baselines_bi") or {}).get(name) or {}
    verdict = bi.get("verdict")
    return {"pass": "BI", "bi_violation": "not BI", "error": "BI ?"}.get(verdict or "", "BI not audited")


def task_rows(entry: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one task's table: nodice, % of the device limit, each baseline (× ratio)."""
    unit = entry.get("unit", "")
    names = _baseline_names(entry)
    header = ["workload", f"nodice {unit}", "of limit"]
    header += [f"{n} ({_bi_label(entry, n)})" for n in names]
    header.append("× best")
    rows = []
    for w in entry.get("workloads", []):
        if not w.get("correct", True):
            rows.append([w["name"], "incorrect", "—", *("" for _ in names), "—"])
            continue
        row = [w["name"], _num(w.get("throughput")), _pct(w.get("limit_fraction"))]
        for n in names:
            b = (w.get("baselines") or {}).get(n)
            row.append("—" if b is None else f"{_num(b.get('throughput'))} ({_ratio(b.get('ratio'))})")
        row.append(_ratio(w.get("ratio_best")))
        rows.append(row)
    if rows:
        geo = ["**geomean**", _num(entry.get("geomean")), ""]
        geo += [_num((entry.get("baseline_geomeans") or {}).get(n)) for n in names]
        geo.append(_ratio(entry.get("ratio_best_geomean")))
        rows.append(geo)
    return header, rows


def markdown(report: dict[str, Any]) -> str:
    """Every task's table with the run's provenance above it."""
    versions = ", ".join(f"{k} {v}" for k, v in (report.get("versions") or {}).items())
    limits = report.get("limits") or {}
    lines = [
        f"Measured {report.get('date', '')} on {report.get('device', '')}; {versions}.",
        f"Command: `{report.get('command', '')}`. Ceilings measured in the same run: "
        + ", ".join(f"{k} = {v}" for k, v in limits.items())
        + ". Throughput is the median of CUDA-event timings with L2 flushed, each chunk of calls "
        "queued behind a GPU sleep that covers the host's enqueue time (the GPU is timed, not the "
        "launcher); each baseline's BI verdict comes from the gate's dynamic stage on this device; "
        "`× best` is nodice ÷ the fastest correct baseline.",
    ]
    lines += [f"Resumed {r.get('date', '')}: `{r.get('command', '')}`." for r in report.get("resumed") or []]
    lines.append("")
    for task, entry in (report.get("tasks") or {}).items():
        lines.append(f"### {task} — `{entry.get('kernel', '')}` (gate: {entry.get('verdict', '?')})")
        lines.append("")
        missing = entry.get("baselines_missing") or {}
        header, rows = task_rows(entry)
        if rows:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
            lines += ["| " + " | ".join(r) + " |" for r in rows]
        else:
            lines.append(f"not benchmarked: {entry.get('reason') or entry.get('verdict')}")
        for name, reason in missing.items():
            lines.append(f"\nMissing baseline {name}: {reason}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_task(task: str, entry: dict[str, Any], console: Console) -> None:
    header, rows = task_rows(entry)
    title = f"{task}: {entry.get('kernel', '')} (gate: {entry.get('verdict')}, {entry.get('evaluation_s')} s)"
    if not rows:
        console.print(f"{title}: {entry.get('reason') or 'no scores'}", markup=False, highlight=False)
        return
    table = Table(title=title)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for r in rows:
        table.add_row(*(c.replace("**", "") for c in r))
    console.print(table)
    for name, reason in (entry.get("baselines_missing") or {}).items():
        console.print(f"  missing baseline {name}: {reason}", markup=False, highlight=False)
