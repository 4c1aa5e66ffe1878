"""``nodice export openevolve``: a task as OpenEvolve's initial program, evaluator and config."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from nodice.cli.common import fail
from nodice.errors import NodiceError
from nodice.integrations.openevolve_export import (
    DEFAULT_API_BASE,
    DEFAULT_MODEL,
    OpenEvolveExport,
    export_openevolve,
)


def openevolve(
    task: Annotated[str, typer.Argument(help="task name (see `nodice tasks`)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="folder to write the three files into")],
    device: Annotated[
        str | None, typer.Option(help="cpu or cuda (default: cuda if available where OpenEvolve runs)")
    ] = None,
    api_base: Annotated[str, typer.Option(help="OpenAI-compatible endpoint of the LLM")] = DEFAULT_API_BASE,
    model: Annotated[str, typer.Option(help="model name at that endpoint")] = DEFAULT_MODEL,
    iterations: Annotated[int, typer.Option(help="max_iterations in config.yaml")] = 100,
    workers: Annotated[int, typer.Option(help="evaluations in flight (parallel_evaluations)")] = 1,
    seed: Annotated[Path | None, typer.Option(help="initial kernel (default: the task's seed)")] = None,
    entry: Annotated[str, typer.Option(help="name of the kernel function")] = "kernel",
    force: Annotated[bool, typer.Option("--force", help="overwrite existing files")] = False,
) -> None:
    """Write initial_program.py, evaluator.py and config.yaml for `openevolve-run`, nodice as evaluator."""
    opts = OpenEvolveExport(task, out, device, api_base, model, iterations, workers, seed, entry, force)
    try:
        paths = export_openevolve(opts)
    except NodiceError as exc:
        fail(exc.line())
    for path in paths:
        print(path)
    if importlib.util.find_spec("openevolve") is None:
        print("note: OpenEvolve is not installed here; pip install 'nodice[openevolve]' to run it")
    d = opts.out
    print(
        f"run: openevolve-run {d / 'initial_program.py'} {d / 'evaluator.py'} "
        f"--config {d / 'config.yaml'} --iterations 10"
    )


def register(app: typer.Typer) -> None:
    """Add ``export openevolve`` under the ``export`` group (created here unless another exporter did)."""
    group = next((g.typer_instance for g in app.registered_groups if g.name == "export"), None)
    if group is None:
        group = typer.Typer(no_args_is_help=True, help="Export a task for another search framework.")
        app.add_typer(group, name="export")
    group.command("openevolve")(openevolve)
