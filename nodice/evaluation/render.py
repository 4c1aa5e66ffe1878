"""The score vector as a terminal table (``nodice check --bench``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from nodice.evaluation.record import Evaluation
from nodice.measuring.score import WorkloadScore


def _fmt(v: float | None, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}g}"


def _ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def score_table(scores: list[WorkloadScore], title: str) -> Table:
    """One row per workload: the candidate's time and throughput, each baseline's, the ratios."""
    unit = scores[0].unit if scores else ""
    names: list[str] = []
    for s in scores:
        names += [n for n in s.baselines if n not in names]
    table = Table(title=title)
    # GB/s tasks on CUDA: the throughput over a copy of the same bytes (the bar for that size).
    copies = any(s.copy_fraction is not None for s in scores)
    copy_col = ["of copy, same size"] if copies else []
    for col in ("workload", "ms", unit, "of limit", *copy_col, *names, "× best"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for s in scores:
        if not s.correct:
            blanks = len(names) + (1 if copies else 0)
            why = f"incorrect: {s.detail}"[:60]
            table.add_row(s.workload, "—", "0", "—", *("" for _ in range(blanks)), why)
            continue
        limit = "—" if s.limit_fraction is None else f"{s.limit_fraction:.0%}"
        row = [s.workload, _fmt(s.ms), _fmt(s.throughput), limit]
        if copies:
            row.append("—" if s.copy_fraction is None else f"{s.copy_fraction:.0%}")
        for n in names:
            b = s.baselines.get(n)
            row.append("—" if b is None else f"{_fmt(b.throughput)} ({_ratio(b.ratio)})")
        row.append(_ratio(s.ratio_best))
        table.add_row(*row)
    return table


def render_scores(e: Evaluation, console: Console) -> None:
    ratio = f", {e.ratio_best:.3g}× the best baseline" if e.ratio_best else ""
    title = f"benchmark ({e.device}; geomean {e.geomean:.4g} {e.unit or ''}{ratio})"
    console.print(score_table(e.scores, title))
