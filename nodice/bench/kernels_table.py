"""The kernel benchmark report as Markdown (for BENCHMARKS.md) and as terminal tables."""

from __future__ import annotations

import math
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


def _verdict(entry: dict[str, Any], name: str) -> str:
    return str(((entry.get("baselines_bi") or {}).get(name) or {}).get("verdict") or "")


def _bi_label(entry: dict[str, Any], name: str) -> str:
    labels = {"pass": "BI", "bi_violation": "not BI", "error": "BI ?"}
    return labels.get(_verdict(entry, name), "BI not audited")


def invariant_baselines(entry: dict[str, Any]) -> list[str]:
    """The task's baselines whose BI audit on this device passed, in the order they were measured."""
    return [n for n in _baseline_names(entry) if _verdict(entry, n) == "pass"]


def ratio_best_invariant(workload: dict[str, Any], invariant: list[str]) -> float | None:
    """nodice ÷ the fastest correct batch-invariant baseline of one workload (None: none measured)."""
    if not workload.get("correct", True):
        return None
    levels = [
        float(b["throughput"])
        for n, b in (workload.get("baselines") or {}).items()
        if n in invariant and b.get("correct", True) and (b.get("throughput") or 0) > 0
    ]
    if not levels or workload.get("throughput") is None:
        return None
    return float(workload["throughput"]) / max(levels)


def _geomean(values: list[float | None]) -> float | None:
    if not values or any(v is None or v <= 0 for v in values):
        return None
    logs = [math.log(float(v)) for v in values if v is not None]
    return math.exp(sum(logs) / len(logs))


def invariant_ratios(entry: dict[str, Any]) -> tuple[list[float | None], float | None]:
    """Each workload's ratio to the fastest batch-invariant baseline, and their geomean."""
    invariant = invariant_baselines(entry)
    ratios = [ratio_best_invariant(w, invariant) for w in entry.get("workloads", [])]
    return ratios, _geomean(ratios)


def task_rows(entry: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one task's table: nodice, % of the device limit, each baseline (× ratio).

    The baselines that passed their BI audit come first, then ``× best BI`` (nodice ÷ the fastest
    of them), then the others and ``× best`` (nodice ÷ the fastest correct baseline of all).
    """
    unit = entry.get("unit", "")
    invariant = invariant_baselines(entry)
    names = invariant + [n for n in _baseline_names(entry) if n not in invariant]
    # GB/s tasks on CUDA: nodice over a copy of the same bytes timed beside it.
    copies = any(w.get("copy_fraction") is not None for w in entry.get("workloads", []))
    header = ["workload", f"nodice {unit}", "of limit", *(["of copy, same size"] if copies else [])]
    header += [f"{n} ({_bi_label(entry, n)})" for n in invariant]
    if invariant:
        header.append("× best BI")
    header += [f"{n} ({_bi_label(entry, n)})" for n in names[len(invariant) :]]
    header.append("× best")
    ratios, ratios_geomean = invariant_ratios(entry)
    rows = []
    for w, ratio_bi in zip(entry.get("workloads", []), ratios, strict=True):
        if not w.get("correct", True):
            blanks = len(names) + (1 if invariant else 0) + (1 if copies else 0)
            rows.append([w["name"], "incorrect", "—", *("" for _ in range(blanks)), "—"])
            continue
        cells = []
        for n in names:
            b = (w.get("baselines") or {}).get(n)
            cells.append("—" if b is None else f"{_num(b.get('throughput'))} ({_ratio(b.get('ratio'))})")
        row = [w["name"], _num(w.get("throughput")), _pct(w.get("limit_fraction"))]
        if copies:
            row.append(_pct(w.get("copy_fraction")))
        row += cells[: len(invariant)]
        if invariant:
            row.append(_ratio(ratio_bi))
        row += [*cells[len(invariant) :], _ratio(w.get("ratio_best"))]
        rows.append(row)
    if rows:
        levels = [_num((entry.get("baseline_geomeans") or {}).get(n)) for n in names]
        geo = ["**geomean**", _num(entry.get("geomean")), "", *([""] if copies else [])]
        geo += levels[: len(invariant)]
        if invariant:
            geo.append(_ratio(ratios_geomean))
        geo += [*levels[len(invariant) :], _ratio(entry.get("ratio_best_geomean"))]
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
        "`× best` is nodice ÷ the fastest correct baseline, `× best BI` ÷ the fastest of those "
        "that passed their BI audit (their columns come first).",
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
