"""The score vector as a terminal table (``nodice check --bench``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from nodice.evaluation.record import Evaluation


def _fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}g}"


def render_scores(e: Evaluation, console: Console) -> None:
    names = sorted({b for s in e.scores for b in s.baselines})
    table = Table(title=f"benchmark ({e.device}; geomean speedup over the reference {e.geomean:.3g})")
    for col in ("workload", "ms", "reference ms", *(f"{n} ms" for n in names), "TFLOP/s", "GB/s", "score"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for s in e.scores:
        row = [s.workload, _fmt(s.ms, 4), _fmt(s.reference_ms, 4)]
        row += [_fmt(s.baselines.get(n), 4) for n in names]
        row += [_fmt(s.tflops), _fmt(s.gbps), f"{s.score:.3g}" + ("" if s.correct else f" ({s.detail})")]
        table.add_row(*row)
    console.print(table)
