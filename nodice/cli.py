"""The ``nodice`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR, CheckResult

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Batch-invariance gate and evolutionary search for GPU kernels.",
)
out = Console()
err = Console(stderr=True)

EXAMPLES_DIR = Path(__file__).parent / "examples"

_VERDICT_STYLE = {
    "pass": "bold green",
    "bi_violation": "bold red",
    "incorrect": "bold yellow",
    "cheat": "bold magenta",
    "error": "bold red",
}


def _fail(message: str) -> None:
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_ERROR)


def render_result(r: CheckResult, console: Console = out) -> None:
    style = _VERDICT_STYLE.get(r.verdict, "bold")
    console.print(f"[{style}]{r.verdict.upper()}[/] {r.candidate} (task {r.task}, {r.device}, {r.dtype})")
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
    task: str | None, reference: Path | None, batch_axis: int | None, entry: str | None
) -> tuple[str, str]:
    """The task name and entry point from ``--task`` or ``--reference`` (exactly one of them)."""
    from nodice.references import REFERENCE_ENTRY, task_from_options

    try:
        name = task_from_options(task, reference, batch_axis, "--task T")
    except NodiceError as exc:
        _fail(exc.line())
    return name, entry or (REFERENCE_ENTRY if reference is not None else "kernel")


@app.command()
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
    if static_only and dynamic_only:
        _fail("--static-only and --dynamic-only exclude each other")
    options = dict(
        device=device,
        seed=seed,
        timeout=timeout,
        sandbox=sandbox,
        static_only=static_only,
        dynamic_only=dynamic_only,
        contracts=[str(c) for c in contract or []],
        store=store,
        as_json=as_json,
    )
    if definition is None:
        if trace is not None:
            _fail("--trace goes with --definition")
        task, entry = _task_and_entry(task, reference, batch_axis, entry)
        _run_check(str(file), task, entry, bench=bench, **options)  # type: ignore[arg-type]
        return
    if task is not None or reference is not None or entry is not None:
        _fail("--definition names the task and the entry point: drop --task, --reference and --entry")
    if trace is not None and (static_only or not sandbox):
        _fail("--trace records an evaluation in the sandbox: drop --static-only and --no-sandbox")
    import tempfile

    from nodice.integrations import flashinfer_bench as fib

    with tempfile.TemporaryDirectory(prefix="nodice-solution-") as folder:
        try:
            prepared = fib.prepare(file, definition, folder)
        except NodiceError as exc:
            _fail(exc.line())

        def finish(result: CheckResult, evaluation: Any) -> None:
            fib.relabel(result, prepared, folder, file)
            if trace is not None and evaluation is not None:
                n = fib.write_traces(evaluation, prepared, trace)
                err.print(f"{n} FlashInfer-Bench trace(s) written to {trace}", markup=False, highlight=False)

        _run_check(
            str(prepared.candidate),
            prepared.task,
            prepared.entry,
            bench=bench or trace is not None,
            finish=finish,
            **options,  # type: ignore[arg-type]
        )


def _run_check(
    path: str,
    task: str,
    entry: str,
    *,
    device: str | None,
    seed: int | None,
    timeout: float | None,
    sandbox: bool,
    static_only: bool,
    dynamic_only: bool,
    contracts: list[str],
    bench: bool,
    store: Path | None,
    as_json: bool,
    finish: Callable[[CheckResult, Any], None] | None = None,
) -> None:
    """The gate on ``path`` for ``task``; prints the result and exits with its code."""
    if (bench or store is not None) and not (sandbox and not static_only):
        _fail("--bench and --store run the candidate in the sandbox: drop --no-sandbox and --static-only")
    kwargs = dict(
        path=path,
        task=task,
        device=device,
        entry=entry,
        seed=seed,
        static=not dynamic_only,
        correctness=not (dynamic_only or static_only),
        dynamic=not static_only,
        contracts=contracts,
    )
    evaluation = None
    if sandbox and not static_only:  # static analysis never runs the candidate's code
        from nodice.evaluation import Evaluator

        try:
            ev = Evaluator(device=device, isolation="isolated", timeout_s=timeout, store=store)
        except ValueError as exc:
            _fail(f"device unavailable: {exc}")
        with ev:
            evaluation = ev.evaluate(
                **{k: v for k, v in kwargs.items() if k not in ("device",)},  # type: ignore[arg-type]
                bench=bench,
            )
        result = evaluation.check
    else:
        from nodice.gate.pipeline import check as run_check

        result = run_check(**kwargs)  # type: ignore[arg-type]
    if finish is not None:
        finish(result, evaluation)
    if as_json:
        payload = result.to_dict()
        if evaluation is not None and bench:
            payload["scores"] = [s.to_dict() for s in evaluation.scores]
            payload["geomean"] = evaluation.geomean
        print(json.dumps(payload, indent=2))
        if result.verdict == "error":
            err.print(result.error or "error", markup=False, highlight=False)
    elif result.verdict == "error":
        _fail(result.error or "error")
    else:
        render_result(result)
        if evaluation is not None and evaluation.scores:
            from nodice.evaluation.render import render_scores

            render_scores(evaluation, out)
    raise typer.Exit(result.exit_code)


@app.command()
def tasks(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the task catalog with signatures and workloads."""
    from nodice.tasks import all_tasks

    catalog = [t.describe() for t in all_tasks()]
    if as_json:
        print(json.dumps(catalog, indent=2))
        return
    for t in catalog:
        out.print(f"[bold]{t['name']}[/] ({t['family']}; sample: {t['sample']})")
        out.print(f"  {t['signature']}", markup=False, highlight=False)
        table = Table(show_header=True, header_style="dim", box=None, padding=(0, 2))
        table.add_column("workload")
        table.add_column("model")
        table.add_column("shape")
        for w in t["workloads"]:
            shape = ", ".join(f"{k}={v}" for k, v in w.items() if k not in ("name", "model"))
            table.add_row(w["name"], w["model"], shape)
        out.print(table)
    out.print(
        "Any PyTorch operator of your own: nodice check NEW.py --reference REF.py (KernelBench's Model / "
        "ModelNew convention, docs/reference.md); a FlashInfer-Bench Solution: nodice check SOLUTION.json "
        "--definition DEF.json (docs/flashinfer-bench.md)",
        style="dim",
        markup=False,
        highlight=False,
    )


# In nodice/examples/reference/ the candidates are ModelNew classes judged against this reference file.
REFERENCE_MODEL = "model.py"


def _example_task(folder: Path) -> tuple[str, str]:
    """The task and entry point the examples in ``folder`` are checked for."""
    if folder.name != "reference":
        return folder.name, "kernel"
    from nodice.references import REFERENCE_ENTRY, reference_task_name

    return reference_task_name(folder / REFERENCE_MODEL), REFERENCE_ENTRY


@app.command()
def demo(
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="only these tasks")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
) -> None:
    """Run the gate on every bundled example (seeds pass, violating variants are caught)."""
    from nodice.evaluation.sandbox import check_isolated

    folders = sorted(p for p in EXAMPLES_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if task:
        folders = [f for f in folders if f.name in task]
    table = Table(title="nodice check on the bundled examples")
    for col in ("task", "candidate", "expected", "verdict", "ms", "reason"):
        table.add_column(col, overflow="fold")
    surprises = 0
    for folder in folders:
        for f in sorted(folder.glob("*.py")):
            if f.name.startswith("_") or f.name == REFERENCE_MODEL:
                continue
            expected = "pass" if f.stem == "seed" else "reject"
            task_name, entry = _example_task(folder)
            r = check_isolated(path=str(f), task=task_name, entry=entry, device=device, seed=seed)
            ms = sum(s.ms for s in r.stages)
            ok = (r.verdict == "pass") == (expected == "pass") and r.verdict != "error"
            surprises += not ok
            style = _VERDICT_STYLE.get(r.verdict, "")
            table.add_row(
                folder.name, f.name, expected, f"[{style}]{r.verdict}[/]", f"{ms:.0f}", (r.reason or "")[:90]
            )
            out.print(f"{folder.name}/{f.name}: {r.verdict}", highlight=False)
    out.print(table)
    if surprises:
        _fail(f"{surprises} example(s) did not get the expected verdict")


# Commands that live with their own capability register here (module path, function name).
_COMMAND_MODULES: list[str] = [
    "nodice.evolution.commands",
    "nodice.bench.commands",
    "nodice.audit",
    "nodice.integrations.openevolve_export",
]


def _register_commands() -> None:
    import importlib

    for mod in _COMMAND_MODULES:
        importlib.import_module(mod).register(app)


def main() -> None:
    _register_commands()
    try:
        app()
    except NodiceError as exc:  # pragma: no cover - commands handle their own
        print(exc.line(), file=sys.stderr)
        sys.exit(EXIT_ERROR)
