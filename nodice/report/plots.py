"""The report's PNG plots (matplotlib, no display needed)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

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


def trajectory(data: RunData, path: Path) -> Path:
    """Running-best geomean after every evaluation, the scored attempts, and the task's baselines."""
    fig, ax = plt.subplots(figsize=(9, 4.6), dpi=110)
    best, xs, ys = 0.0, [], []
    for a in data.attempts:
        if a.outcome == "committed":
            best = max(best, a.geomean)
        xs.append(a.id)
        ys.append(best if best > 0 else float("nan"))
    if xs:
        ax.step(xs, ys, where="post", color="#1b5e20", linewidth=2.2, label="running best (committed)")
    for outcome in ("committed", "slower", "eligible"):
        pts = [(a.id, a.geomean) for a in data.attempts if a.outcome == outcome and a.geomean > 0]
        if pts:
            px, py = [p[0] for p in pts], [p[1] for p in pts]
            ax.scatter(px, py, s=28, color=OUTCOME_COLORS[outcome], label=outcome, zorder=3)
    for v in data.versions:
        found = next((x for x in data.attempts if x.id == v.record.attempt), None)
        if found is not None:
            ax.annotate(
                f"v{v.record.version}",
                (found.id, v.record.geomean),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=8,
            )
    rejected = [a.id for a in data.attempts if a.rejection and a.rejection not in ("slower", "gate_only")]
    if rejected and any(y == y for y in ys):
        floor = min(y for y in ys if y == y)
        ax.scatter(
            rejected,
            [floor * 0.97] * len(rejected),
            marker="x",
            color="#c62828",
            s=30,
            label="rejected by the gate",
            zorder=3,
        )
    for i, (name, value) in enumerate(sorted(data.baselines().items())):
        ax.axhline(
            value,
            linestyle=_BASELINE_STYLES[i % len(_BASELINE_STYLES)],
            color="#455a64",
            linewidth=1.2,
            label=f"baseline: {name} ({value:.3g})",
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("evaluation")
    ax.set_ylabel("geomean speedup over the reference")
    ax.set_yscale("log")
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
    """Per-workload score of every committed version."""
    names = data.workloads
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    versions = data.versions[-8:]
    width = 0.8 / max(len(versions), 1)
    for i, v in enumerate(versions):
        by_name = {s["workload"]: s.get("score", 0.0) for s in v.record.scores}
        xs = [j + i * width for j in range(len(names))]
        ax.bar(xs, [by_name.get(n, 0.0) for n in names], width=width, label=f"v{v.record.version}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("speedup over the reference")
    ax.set_title("per-workload score of the committed versions")
    ax.grid(True, axis="y", alpha=0.3)
    if versions:
        ax.legend(fontsize=8, ncol=4)
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
