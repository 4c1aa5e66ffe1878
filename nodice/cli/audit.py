"""``nodice audit``: BI verdicts for existing kernels (files, folders, installed callables, baselines)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nodice.audit import AuditRow, audit_callable, audit_file, audit_named_baseline, expand
from nodice.cli.common import out
from nodice.gate.result import EXIT_ERROR, EXIT_PASS, EXIT_REJECTED


def audit(
    targets: Annotated[list[str] | None, typer.Argument(help="files, folders or dotted callables")] = None,
    baseline: Annotated[
        list[str] | None,
        typer.Option("--baseline", "-b", help='a benchmark baseline by name, e.g. "cuDNN SDPA" (repeatable)'),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="task of every target")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    timeout: Annotated[
        float | None, typer.Option(help="per-file wall-clock limit (s); default: the task's step budgets")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON rows")] = False,
) -> None:
    """BI audit of existing kernels: a table of verdicts and mechanisms."""
    if not targets and not baseline:
        raise typer.BadParameter("give files, folders, dotted callables or --baseline NAME")
    rows: list[AuditRow] = [audit_named_baseline(name, task, device, seed) for name in baseline or []]
    for target in expand(targets or []):
        looks_like_file = target.endswith(".py") or "/" in target or Path(target).exists()
        if looks_like_file:
            rows.append(audit_file(Path(target), task, device, seed, timeout))
        else:
            rows.append(audit_callable(target, task, device, seed))
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        table = Table(title="nodice audit")
        for col in ("target", "task", "verdict", "mechanism", "detail"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r.target, r.task, r.verdict, r.mechanism, r.detail[:120])
        out.print(table)
    verdicts = {r.verdict for r in rows}
    if "error" in verdicts:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_REJECTED if verdicts - {"pass"} else EXIT_PASS)


def register(app: typer.Typer) -> None:
    app.command()(audit)
