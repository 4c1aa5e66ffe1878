"""Run reports: ``write_report(RUN)`` writes RUN/report.html and its PNG plots beside it."""

from __future__ import annotations

import contextlib
from pathlib import Path

from nodice.report.data import ReportError, RunData, load_run

__all__ = ["ReportError", "RunData", "load_run", "write_report"]


def write_report(run_dir: str | Path) -> Path:
    """Write the self-contained HTML report of a run and return its path."""
    from nodice.report import html, plots

    data = load_run(run_dir)
    out = data.root / "report.html"
    tmp = out.with_suffix(".html.tmp")
    try:
        images = {
            "trajectory": plots.trajectory(data, data.root / "trajectory.png"),
            "workloads": plots.workloads(data, data.root / "workloads.png"),
            "rejections": plots.rejections(data, data.root / "rejections.png"),
        }
        tmp.write_text(html.render(data, images), encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        # A failed rename names both paths: the one in the way is the destination.
        raise ReportError(f"{exc.filename2 or exc.filename or out}: {exc.strerror or exc}") from None
    return out
