"""``nodice audit``: BI verdicts for existing kernels (files, folders, installed callables, baselines)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nodice.audit import AuditRow, audit_callable, audit_file, audit_named_baseline, expand, summary
from nodice.cli.common import fail, out, seconds_problem, seed_problem
from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR, EXIT_PASS, EXIT_REJECTED


def audit(
    targets: Annotated[list[str] | None, typer.Argument(help="files, folders or dotted callables")] = None,
    baseline: Annotated[
        list[str] | None,
        typer.Option("--baseline", "-b", help='a benchmark baseline by name, e.g. "cuDNN SDPA" (repeatable)'),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="task of every target")] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="a KernelBench-style reference (Model, get_inputs, get_init_inputs) for every target "
            "(each defines ModelNew); a target that defines Model and get_inputs itself needs none",
        ),
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="with --reference: shrink the batch axis to N")
    ] = None,
    eval_mode: Annotated[
        bool, typer.Option("--eval-mode", help="with --reference: modules in eval mode (default: training)")
    ] = False,
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
    problem = seed_problem(seed) or seconds_problem("--timeout", timeout)
    if problem:
        fail(problem)
    if reference is not None or batch_size is not None or eval_mode:
        from nodice.references import task_from_options

        if reference is None:
            fail("--batch-size and --eval-mode go with --reference")
        try:
            task = task_from_options(task, reference, None, "--task T", batch_size, eval_mode)
        except NodiceError as exc:
            fail(exc.line())
    if device is not None:
        # One line for a device the machine lacks, not an error row for every target.
        from nodice.gate.runtime import resolve_device

        try:
            resolve_device(device)
        except NodiceError as exc:
            fail(exc.line())
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
        table = Table(title="nodice audit", caption=summary(rows))
        for col in ("target", "task", "verdict", "mechanism", "detail"):
            table.add_column(col, overflow="fold")
        for r in rows:
            shown = (
                f"reference {Path(r.task.split('#')[0]).name}" if r.task.startswith("reference:") else r.task
            )
            table.add_row(r.target, shown, r.verdict, r.mechanism, r.detail[:120])
        out.print(table)
    verdicts = {r.verdict for r in rows}
    if verdicts & {"error", "not_applicable"}:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_REJECTED if verdicts - {"pass"} else EXIT_PASS)


def register(app: typer.Typer) -> None:
    app.command()(audit)
