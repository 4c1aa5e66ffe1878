"""``nodice check``: one candidate through the gate (and the benchmark), one verdict, one exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from nodice.cli.common import (
    VERDICT_STYLE,
    err,
    fail,
    out,
    outputs_problem,
    seconds_problem,
    seed_problem,
)
from nodice.errors import NodiceError
from nodice.evaluation.request import EvaluationRequest
from nodice.gate.result import CheckResult

if TYPE_CHECKING:
    from nodice.evaluation.record import Evaluation


def render_result(r: CheckResult, console: Console = out) -> None:
    style = VERDICT_STYLE.get(r.verdict, "bold")
    where = ", ".join(x for x in (r.task and f"task {r.task}", r.device, r.dtype) if x)
    console.print(f"[{style}]{r.verdict.upper()}[/] {r.candidate} ({where})")
    for s in r.stages:
        detail = f" — {s.detail}" if s.detail else ""
        console.print(
            f"  {s.name:<12} {s.verdict:<10} {s.ms:>10.1f} ms{detail}", markup=False, highlight=False
        )
    for f in r.findings:
        console.print(
            f"  [{f.severity}] {f.file}:{f.line} {f.mechanism} → {f.protected}: {f.message}",
            markup=False,
            highlight=False,
        )
        for step in f.path:
            console.print(f"      {step}", markup=False, highlight=False)
        if f.guidance and f.severity != "cleared":  # a cleared finding needs no repair
            console.print(f"      fix: {f.guidance}", markup=False, highlight=False)
    if r.mismatch is not None:
        m = r.mismatch
        console.print(f"  first mismatch: {m.line()}", markup=False, highlight=False)
        console.print(f"  context: {json.dumps(m.context)}", markup=False, highlight=False)
    if r.error:
        console.print(f"  {r.error}", markup=False, highlight=False)
    for n in r.notes:
        console.print(f"  note: {n}", style="dim", markup=False, highlight=False)


def _task_and_entry(
    task: str | None,
    reference: Path | None,
    batch_axis: int | None,
    entry: str | None,
    batch_size: int | None,
    eval_mode: bool,
    refuse: Callable[[str], NoReturn],
) -> tuple[str, str]:
    """The task name and entry point from ``--task`` or ``--reference`` (exactly one of them)."""
    from nodice.references import REFERENCE_ENTRY, task_from_options

    try:
        name = task_from_options(task, reference, batch_axis, "--task T", batch_size, eval_mode)
    except NodiceError as exc:
        refuse(exc.line())
    return name, entry or (REFERENCE_ENTRY if reference is not None else "kernel")


def check(
    file: Annotated[
        Path,
        typer.Argument(help="candidate Python file (a FlashInfer-Bench Solution JSON with --definition)"),
    ],
    task: Annotated[str | None, typer.Option("--task", "-t", help="task name (see `nodice tasks`)")] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="a PyTorch reference file (Model, get_inputs, get_init_inputs) instead of --task; "
            "the candidate defines ModelNew",
        ),
    ] = None,
    batch_axis: Annotated[
        int | None, typer.Option("--batch-axis", help="with --reference: the batch axis of every tensor (0)")
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            help="with --reference: shrink the batch axis of get_inputs() to N samples (the other "
            "dimensions stay); for problems sized for a larger device",
        ),
    ] = None,
    eval_mode: Annotated[
        bool,
        typer.Option(
            "--eval-mode",
            help="with --reference: run Model and ModelNew in eval mode (default: training mode, "
            "as KernelBench's harness runs them)",
        ),
    ] = False,
    definition: Annotated[
        Path | None,
        typer.Option(
            "--definition",
            help="a FlashInfer-Bench Definition JSON instead of --task; FILE is a Solution JSON for it",
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="with --definition: write FlashInfer-Bench Traces (JSONL) with the BI verdict; "
            "benchmarks a passing solution",
        ),
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    entry: Annotated[
        str | None, typer.Option(help="name of the entry point (default: kernel; ModelNew with --reference)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    dynamic_only: Annotated[
        bool, typer.Option("--dynamic-only", help="run dynamic BI validation alone")
    ] = False,
    static_only: Annotated[
        bool, typer.Option("--static-only", help="run static BI analysis alone (nothing is executed)")
    ] = False,
    contract: Annotated[
        list[Path] | None, typer.Option("--contract", help="extra contract file (repeatable)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="random seed (default: fresh)")] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="one wall-clock limit in seconds on the whole evaluation, replacing the per-step "
            "budgets derived from the task (default: those budgets; a hang is reported within one)"
        ),
    ] = None,
    sandbox: Annotated[bool, typer.Option(help="run the candidate in a separate process")] = True,
    bench: Annotated[
        bool, typer.Option("--bench", help="benchmark a passing candidate: per-workload scores and geomean")
    ] = False,
    store: Annotated[
        Path | None, typer.Option("--store", help="record the evaluation in this SQLite result store")
    ] = None,
) -> None:
    """Run the BI gate on one candidate kernel: static → correctness → dynamic (→ benchmark)."""
    # --static-only runs none of the candidate's code: no process is needed between it and this one.
    isolation = "isolated" if sandbox and not static_only else "inline"
    where = _Where(device, isolation, timeout, store, as_json)
    if static_only and dynamic_only:
        _refuse("--static-only and --dynamic-only exclude each other", where, str(file), task or "")
    problem = _option_problem(seed, timeout, sandbox, static_only, store, trace) or outputs_problem(
        [("--trace", trace), ("--store", store)],
        [
            ("the solution" if definition is not None else "the candidate", file),
            ("--definition", definition),
            ("--reference", reference),
            *(("--contract", c) for c in contract or ()),
        ],
    )
    if problem:
        _refuse(problem, where, str(file), task or "")

    def request(path: str | Path, task: str, entry: str, bench: bool) -> EvaluationRequest:
        return EvaluationRequest.create(
            path,
            task,
            seed=seed,
            contracts=contract,
            entry=entry,
            bench=bench,
            static=not dynamic_only,
            correctness=not (dynamic_only or static_only),
            dynamic=not static_only,
        )

    def refuse(message: str) -> NoReturn:
        named = f"reference:{reference.resolve()}" if reference is not None else None
        _refuse(message, where, str(file), str(definition or named or task or ""))

    if definition is None:
        if trace is not None:
            refuse("--trace goes with --definition")
        task, entry = _task_and_entry(task, reference, batch_axis, entry, batch_size, eval_mode, refuse)
        _run_check(request(file, task, entry, bench), str(file), where)
        return

    if task is not None or reference is not None or entry is not None:
        refuse("--definition names the task and the entry point: drop --task, --reference and --entry")
    if batch_axis is not None or batch_size is not None or eval_mode:
        refuse("--batch-axis, --batch-size and --eval-mode go with --reference")
    if trace is not None and isolation == "inline":
        refuse("--trace records an evaluation in the sandbox: drop --static-only and --no-sandbox")
    import tempfile

    from nodice.bench.output import OutputError
    from nodice.integrations import flashinfer_bench as fib

    with tempfile.TemporaryDirectory(prefix="nodice-solution-") as folder:
        try:
            prepared = fib.prepare(file, definition, folder)
        except NodiceError as exc:
            refuse(exc.line())

        def finish(result: CheckResult, evaluation: Evaluation) -> None:
            fib.relabel(result, prepared, folder, file)
            if trace is not None and evaluation is not None:
                try:
                    n = fib.write_traces(evaluation, prepared, trace)
                except OutputError as exc:
                    refuse(f"--trace {exc.line()}")
                err.print(f"{n} FlashInfer-Bench trace(s) written to {trace}", markup=False, highlight=False)

        bench = bench or trace is not None
        candidate = str(prepared.candidate)
        _run_check(request(candidate, prepared.task, prepared.entry, bench), candidate, where, finish)


def _option_problem(
    seed: int | None,
    timeout: float | None,
    sandbox: bool,
    static_only: bool,
    store: Path | None,
    trace: Path | None,
) -> str:
    """What is wrong with the options that take a value nodice cannot use ("" when nothing is)."""
    problem = seed_problem(seed) or seconds_problem("--timeout", timeout)
    if problem:
        return problem
    if timeout is not None and not sandbox and not static_only:
        return "--timeout needs the sandbox (--no-sandbox runs the candidate without limits): drop one"
    for option, path in (("--store", store), ("--trace", trace)):
        if path is None:
            continue
        if path.is_dir():
            return f"{option} {path}: is a folder (give a file)"
        if not path.parent.is_dir():
            return f"{option} {path}: no such folder {path.parent}"
    if trace is not None:
        import os

        if not os.access(trace if trace.exists() else trace.parent, os.W_OK):
            return f"--trace {trace}: not writable"
    return ""


def _refuse(message: str, where: _Where, candidate: str, task: str = "") -> NoReturn:
    """An error before any verdict: with ``--json``, first the one JSON object (verdict ``error``)."""
    result = CheckResult("error", task, candidate, where.device or "", "", error=message, reason=message)
    fail(message, json_object=result.to_dict() if where.as_json else None)


@dataclass(frozen=True)
class _Where:
    """Where the request runs and how its verdict is shown."""

    device: str | None
    isolation: str
    timeout: float | None
    store: Path | None
    as_json: bool


def _run_check(
    request: EvaluationRequest,
    candidate: str,
    where: _Where,
    finish: Callable[[CheckResult, Evaluation], None] | None = None,
) -> None:
    """The one route of ``nodice check``: the request through an Evaluator; prints, exits with the code."""
    from nodice.evaluation import Evaluator

    if (request.bench or where.store is not None) and where.isolation == "inline":
        _refuse(
            "--bench and --store run the candidate in the sandbox: drop --no-sandbox and --static-only",
            where,
            candidate,
            request.task,
        )
    try:
        ev = Evaluator(
            device=where.device, isolation=where.isolation, timeout_s=where.timeout, store=where.store
        )
    except ValueError as exc:
        _refuse(f"device unavailable: {exc}", where, candidate, request.task)
    except NodiceError as exc:
        _refuse(exc.line(), where, candidate, request.task)
    with ev:
        evaluation = ev.run(request, candidate=candidate)
    result = evaluation.check
    bench, as_json = request.bench, where.as_json
    if finish is not None:
        finish(result, evaluation)
    if as_json:
        payload = result.to_dict()
        if bench:
            payload["scores"] = [s.to_dict() for s in evaluation.scores]
            payload["geomean"] = evaluation.geomean
        print(json.dumps(payload, indent=2))
        if result.verdict == "error":
            err.print(result.error or "error", markup=False, highlight=False)
    elif result.verdict == "error":
        fail(result.error or "error")
    else:
        render_result(result)
        if evaluation.scores:
            from nodice.evaluation.render import render_scores

            render_scores(evaluation, out)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(check)
