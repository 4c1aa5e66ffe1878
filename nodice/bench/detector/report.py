"""The detector benchmark's report for people: a terminal table and a Markdown section for BENCHMARKS.md."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from nodice.bench.detector.run import MODE_TITLES, MODES, DetectorReport


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f} %)" if n else "—"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def _rows(report: DetectorReport) -> list[list[str]]:
    rows = []
    for mode in MODES:
        s = report.scores[mode]
        rows.append(
            [
                MODE_TITLES[mode],
                _pct(s.detected, s.violating),
                _pct(s.false_rejections, s.invariant),
                _ms(s.median_ms),
                _ms(s.p90_ms),
                str(s.errors),
            ]
        )
    return rows


HEADER = ["configuration", "detection", "false rejection", "median ms", "p90 ms", "errors"]


def _misses(report: DetectorReport) -> list[str]:
    by_key = {r.key: r for r in report.runs}
    lines = []
    for mode in MODES:
        s = report.scores[mode]
        for title, keys in (("missed", s.missed), ("falsely rejected", s.falsely_rejected)):
            for key in keys:
                r = by_key[key].modes[mode]
                lines.append(f"{MODE_TITLES[mode]} {title}: {key} → {r.verdict} {r.reason[:140]}".rstrip())
    return lines


def render(report: DetectorReport, console: Console) -> None:
    table = Table(
        title=f"BI detector benchmark on {report.device} ({report.candidates_labeled} labeled candidates)"
    )
    for col in HEADER:
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for row in _rows(report):
        table.add_row(*row)
    console.print(table)
    console.print(f"time per candidate: {report.timing}", style="dim", markup=False, highlight=False)
    if report.excluded:
        console.print(
            f"{len(report.excluded)} candidate(s) excluded by the oracle on {report.device}", style="dim"
        )
    for line in _misses(report):
        console.print(f"  {line}", markup=False, highlight=False)


def markdown(report: DetectorReport) -> str:
    """A table with its provenance, ready to paste under BENCHMARKS.md's "Detector benchmark"."""
    v = report.versions
    out = [
        f"**{report.device.upper()}** — {report.date}; {report.machine}; nodice {v.get('nodice')} "
        f"({v.get('commit')}), Python {v.get('python')}, torch {v.get('torch')}, triton {v.get('triton')}, "
        f"numpy {v.get('numpy')}.",
        "",
        f"Command: `{report.command}`" if report.command else "",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(HEADER) - 1)) + "|",
        *("| " + " | ".join(row) + " |" for row in _rows(report)),
        "",
        f"{report.candidates_labeled} labeled candidates, {len(report.excluded)} excluded by the oracle on "
        f"{report.device}. Time per candidate: {report.timing}.",
    ]
    misses = _misses(report)
    if misses:
        out += ["", *(f"- {m}" for m in misses)]
    return "\n".join(line for line in out) + "\n"
