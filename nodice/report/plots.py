"""The report's PNG plots (matplotlib, no display needed).

The trajectory follows AVO's Fig. 5: the running best over evaluations, every
scored attempt as a point, and each baseline's level as a horizontal line, in
the task's unit (legacy runs: speedup over the reference, on a log axis).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from nodice.evolution.scores import BaselineLevel, value_text
from nodice.report.data import RunData

OUTCOME_COLORS = {
    "committed": "#2e7d32",
    "slower": "#f9a825",
    "eligible": "#66bb6a",
    "gate_only": "#4fc3f7",
    "bi_violation": "#c62828",
    "incorrect": "#ef6c00",
    "cheat": "#8e24aa",
    "error": "#6d4c41",
}
_BASELINE_STYLES = ["--", ":", "-.", (0, (5, 1))]


# Above this max/min ratio the y axis is logarithmic, so a seed far below its baselines stays visible.
_LOG_SPAN = 30.0


def _y_label(data: RunData, what: str) -> str:
    """``geomean GB/s``; ``geomean speedup over the reference`` for legacy runs."""
    return " ".join(p for p in (what, "speedup over the reference" if data.legacy else data.unit) if p)


def _scale(ax: Axes, values: list[float], legacy: bool) -> bool:
    """Log scale for legacy runs (as they always were) and for values spanning decades."""
    positive = [v for v in values if v > 0]
    log = legacy or (bool(positive) and max(positive) / min(positive) > _LOG_SPAN)
    if log:
        ax.set_yscale("log")
    return log


def _baseline_label(level: BaselineLevel, unit: str | None) -> str:
    verdict = f" (BI: {level.bi})" if level.bi else ""
    return f"{level.name} {value_text(level.value, unit)}{verdict}"


def trajectory(data: RunData, path: Path) -> Path:
    """Running-best geomean after every evaluation, the scored attempts, and each baseline's level."""
    fig, ax = plt.subplots(figsize=(9, 4.6), dpi=110)
    attempts = [a for a in data.attempts if data.in_unit(a)]
    best, xs, ys = 0.0, [], []
    for a in attempts:
        if a.outcome == "committed":
            best = max(best, a.geomean)
        xs.append(a.id)
        ys.append(best if best > 0 else float("nan"))
    if xs:
        ax.step(xs, ys, where="post", color="#1b5e20", linewidth=2.2, label="running best (committed)")
    scored = [a.geomean for a in attempts if a.geomean > 0]
    for outcome in ("committed", "slower", "eligible"):
        pts = [(a.id, a.geomean) for a in attempts if a.outcome == outcome and a.geomean > 0]
        if pts:
            px, py = [p[0] for p in pts], [p[1] for p in pts]
            ax.scatter(px, py, s=28, color=OUTCOME_COLORS[outcome], label=outcome, zorder=3)
    for v in data.versions:
        found = next((x for x in attempts if x.id == v.record.attempt), None)
        if found is not None:
            ax.annotate(
                f"v{v.record.version}",
                (found.id, v.record.geomean),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=8,
            )
    if data.legacy:
        levels = [(f"baseline: {n} ({val:.3g})", val) for n, val in sorted(data.legacy_baselines().items())]
    else:
        levels = [(_baseline_label(b, data.unit), b.value) for b in data.baseline_levels()]
    log = _scale(ax, scored + [val for _, val in levels], data.legacy)
    rejected = [a.id for a in attempts if a.rejection and a.rejection not in ("slower", "gate_only")]
    if rejected and (scored or not log):
        floor = min(scored) * 0.97 if log else 0.0
        ax.scatter(
            rejected,
            [floor] * len(rejected),
            marker="x",
            color="#c62828",
            s=30,
            label="rejected by the gate",
            zorder=3,
        )
    for i, (label, value) in enumerate(levels):
        ax.axhline(
            value,
            linestyle=_BASELINE_STYLES[i % len(_BASELINE_STYLES)],
            color="#455a64",
            linewidth=1.2,
            label=label,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("evaluation")
    ax.set_ylabel(_y_label(data, "geomean"))
    ax.set_title(f"{data.config.task} on {data.config.device}: running best")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no evaluation yet", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def workloads(data: RunData, path: Path) -> Path:
    """Per-workload score of every committed version, with the fastest baseline on each as a marker."""
    names = data.workloads
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    versions = data.versions[-8:]
    width = 0.8 / max(len(versions), 1)
    values: list[float] = []
    for i, v in enumerate(versions):
        by_name = {s["workload"]: s.get("score", 0.0) for s in v.record.scores}
        xs = [j + i * width for j in range(len(names))]
        heights = [by_name.get(n, 0.0) for n in names]
        values += heights
        ax.bar(xs, heights, width=width, label=f"v{v.record.version}")
    centers = [j + 0.4 - width / 2 for j in range(len(names))]
    fastest = {} if data.legacy else data.fastest_baselines()
    marked = [(j, fastest[n]) for j, n in enumerate(names) if n in fastest]
    for k, (j, (name, value)) in enumerate(marked):
        # One line across the workload's bars: the bar that crosses it beats the fastest library.
        left, right = j - width / 2, j + 0.8 - width / 2
        ax.hlines(
            value,
            left,
            right,
            color="#212121",
            linewidth=2.5,
            zorder=4,
            label="fastest baseline" if k == 0 else "_nolegend_",
        )
        ax.annotate(
            name, (centers[j], value), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7
        )
        values.append(value)
    log = False if data.legacy else _scale(ax, values, False)
    if values and max(values) > 0:  # room for the legend above the bars and markers
        ax.set_ylim(top=max(values) * (8.0 if log else 1.3))
        if not log:
            ax.set_ylim(bottom=0)
    ax.set_xticks(centers)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("speedup over the reference" if data.legacy else f"throughput ({data.unit})")
    ax.set_title("per-workload score of the committed versions")
    ax.grid(True, axis="y", alpha=0.3)
    if versions or marked:
        ax.legend(fontsize=8, ncol=5, loc="upper center")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def rejections(data: RunData, path: Path) -> Path:
    """How many candidates were turned away, by reason."""
    counts = Counter(a.rejection for a in data.attempts if a.rejection)
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    if counts:
        labels, values = zip(*counts.most_common(), strict=True)
        ax.barh(labels, values, color=[OUTCOME_COLORS.get(k, "#607d8b") for k in labels])
        ax.invert_yaxis()
    else:
        ax.text(0.5, 0.5, "no rejection", ha="center", va="center", transform=ax.transAxes)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("candidates")
    ax.set_title("rejections by reason")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
