"""``nodice bench``: the detector benchmark (``detector``) and the oracle that labels its pool (``label``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nodice.bench.detector import MODE_TITLES, MODES, CandidateRun, DetectorReport, run_detector
from nodice.bench.pool import OracleLabel, default_root, load_pool
from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR

out = Console()
err = Console(stderr=True)

PoolOpt = Annotated[
    Path | None,
    typer.Option("--pool", help="pool folder holding labels.json and pool/ (default: bench/detector)"),
]
DeviceOpt = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")]
TaskOpt = Annotated[list[str] | None, typer.Option("--task", "-t", help="only these tasks")]
JobsOpt = Annotated[int, typer.Option(min=1, help="worker processes")]
LimitOpt = Annotated[int | None, typer.Option(min=1, help="at most N candidates")]


def _fail(message: str) -> None:
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_ERROR)


def _device(name: str | None) -> str:
    from nodice.gate.runtime import resolve_device

    return resolve_device(name).type


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f} %)" if n else "—"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def render(report: DetectorReport, console: Console = out) -> None:
    table = Table(
        title=f"BI detector benchmark on {report.device} ({report.candidates_labeled} labeled candidates)"
    )
    for col in ("configuration", "detection", "false rejection", "median ms", "p90 ms", "errors"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for mode in MODES:
        s = report.scores[mode]
        table.add_row(
            MODE_TITLES[mode],
            _pct(s.detected, s.violating),
            _pct(s.false_rejections, s.invariant),
            _ms(s.median_ms),
            _ms(s.p90_ms),
            str(s.errors),
        )
    console.print(table)
    console.print(f"time per candidate: {report.timing}", style="dim", markup=False, highlight=False)
    if report.excluded:
        console.print(
            f"{len(report.excluded)} candidate(s) excluded by the oracle on {report.device}", style="dim"
        )
    by_key = {r.key: r for r in report.runs}
    for mode in MODES:
        s = report.scores[mode]
        for title, keys in (("missed", s.missed), ("falsely rejected", s.falsely_rejected)):
            for key in keys:
                r = by_key[key].modes[mode]
                console.print(
                    f"  {MODE_TITLES[mode]} {title}: {key} → {r.verdict} {r.reason[:140]}",
                    markup=False,
                    highlight=False,
                )


def detector(
    device: DeviceOpt = None,
    pool: PoolOpt = None,
    labels: Annotated[Path | None, typer.Option(help="labels file (default: POOL/labels.json)")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the report as JSON to this file")
    ] = None,
    limit: LimitOpt = None,
    task: TaskOpt = None,
    jobs: JobsOpt = 1,
    seed: Annotated[int, typer.Option(help="the gate's random seed for every candidate")] = 0,
    warmup: Annotated[bool, typer.Option(help="warm-up run of the full gate before the timed runs")] = True,
    timeout: Annotated[float, typer.Option(help="seconds per candidate (all configurations)")] = 1800.0,
) -> None:
    """Detection and false-rejection rates of static-only, dynamic-only and the full gate on the pool."""
    try:
        dev = _device(device)
        the_pool = load_pool(pool or default_root(), labels)
    except NodiceError as exc:
        _fail(exc.line())
        return

    def progress(run: CandidateRun) -> None:
        verdicts = "  ".join(f"{m}={run.modes[m].verdict}" for m in MODES)
        err.print(f"{run.key} [{run.label}] {verdicts}", markup=False, highlight=False)

    report = run_detector(
        the_pool,
        dev,
        limit=limit,
        tasks=task,
        jobs=jobs,
        seed=seed,
        warmup=warmup,
        timeout_s=timeout,
        on_done=progress,
    )
    if report.candidates_labeled == 0:
        _fail(f"no candidate in the pool has a {dev} label (run `nodice bench label --device {dev}`)")
    render(report)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_dict(), indent=1) + "\n")
        out.print(f"wrote {json_out}", markup=False, highlight=False)


def label(
    device: DeviceOpt = None,
    pool: PoolOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="labels file (default: POOL/labels.json)")
    ] = None,
    task: TaskOpt = None,
    candidate: Annotated[list[str] | None, typer.Option(help="only these candidate keys (task/name)")] = None,
    limit: LimitOpt = None,
    jobs: JobsOpt = 1,
    timeout: Annotated[float, typer.Option(help="seconds per candidate")] = 1800.0,
) -> None:
    """Label the pool with the brute-force oracle on one device (other devices' labels are kept)."""
    from nodice.bench.labeling import label_pool

    def progress(key: str, lab: OracleLabel) -> None:
        err.print(f"{key}: {lab.label} — {lab.reason}", markup=False, highlight=False)

    try:
        dev = _device(device)
        root = pool or default_root()
        result = label_pool(
            root,
            dev,
            labels=out_file,
            tasks=task,
            keys=candidate,
            limit=limit,
            jobs=jobs,
            timeout_s=timeout,
            on_done=progress,
        )
    except NodiceError as exc:
        _fail(exc.line())
        return
    path = result.save(out_file)
    counts: dict[str, int] = {}
    for e in result.entries:
        lab = e.label(dev) or "unlabeled"
        counts[lab] = counts.get(lab, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    out.print(f"{dev} labels: {summary}; wrote {path}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    bench = typer.Typer(no_args_is_help=True, help="Benchmarks of nodice itself.")
    bench.command("detector")(detector)
    bench.command("label")(label)
    app.add_typer(bench, name="bench")
