"""What every command shares: the two consoles, one way to fail, the verdicts' colours."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from nodice.gate.result import EXIT_ERROR

# Never wrapped: a line is one line whether it goes to a terminal, a pipe or a file (rich would
# otherwise break it at the terminal's width, or at 80 columns when there is none).
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

VERDICT_STYLE = {
    "pass": "bold green",
    "bi_violation": "bold red",
    "incorrect": "bold yellow",
    "cheat": "bold magenta",
    "not_applicable": "bold cyan",
    "error": "bold red",
}

DeviceOpt = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")]


# torch seeds its generators with a signed 64-bit integer.
SEED_RANGE = (0, 2**63 - 1)


def seed_problem(seed: int | None, option: str = "--seed") -> str:
    """Why ``seed`` cannot seed the gate or a workload (outside 0 … 2**63 − 1), or ""."""
    if seed is None or SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        return ""
    return f"{option} must be between 0 and 2**63 - 1, not {seed}"


def seconds_problem(option: str, seconds: float | None) -> str:
    """Why ``seconds`` cannot be a limit (not a finite positive number), or "" (also when not given)."""
    import math

    if seconds is None or (math.isfinite(seconds) and seconds > 0):
        return ""
    return f"{option} must be a positive number of seconds, not {seconds}"


def output_problem(option: str, path: Path | None) -> str:
    """Why ``path`` cannot be written as an output file (a folder, under a file, not writable), or ""."""
    import os

    if path is None:
        return ""
    if path.is_dir():
        return f"{option} {path} is a folder: give a file name"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{option} {path}: {parent} is a file, not a folder"
            break
    target = Path(os.path.realpath(path))
    if target.exists() and not os.access(target, os.W_OK):
        return f"{option} {path}: not writable"
    # A regular file is written beside itself and moved over (nodice.bench.output): its folder, or
    # the nearest one that exists, must take a new file.
    if not target.exists() or target.is_file():
        folder = next((p for p in target.parents if p.exists()), None)
        if folder is not None and not os.access(folder, os.W_OK | os.X_OK):
            return f"{option} {path}: folder {folder} is not writable"
    return ""


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: through symlinks, ``..`` and hard links."""
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): the paths they resolve to
        return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


def outputs_problem(
    outputs: Sequence[tuple[str, Path | None]], inputs: Sequence[tuple[str, Path | None]] = ()
) -> str:
    """Why a command's output files cannot be written: one that :func:`output_problem` refuses, two
    options naming one file (one would overwrite the other), or an output that is one of the command's
    inputs (writing it would destroy what is read); "" when none. Options given None are left out."""
    given = [(o, p) for o, p in outputs if p is not None]
    for option, path in given:
        problem = output_problem(option, path)
        if problem:
            return problem
    for i, (option, path) in enumerate(given):
        for other, other_path in given[i + 1 :]:
            if same_file(path, other_path):
                return f"{option} and {other} name one file ({path}): give each output its own"
        for source, source_path in inputs:
            if source_path is not None and same_file(path, source_path):
                return f"{option} {path} is the same file as {source} {source_path}: it would be overwritten"
    return ""


def fail(message: str, code: int = EXIT_ERROR, json_object: dict[str, Any] | None = None) -> NoReturn:
    """One line on stderr (never wrapped: it may be a file) and the exit code: the CLI's only error path.
    ``json_object`` (a command run with ``--json``) is printed on stdout first."""
    if json_object is not None:
        print(json.dumps(json_object, indent=2))
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def wrote(markdown_path: Path | None, markdown: Callable[[], str], json_path: Path | None) -> None:
    """Write a report's Markdown (when asked) and say which files a command wrote."""
    from nodice.bench.output import OutputError, write_report

    if markdown_path is not None:
        try:
            write_report(markdown_path, markdown(), "--markdown")
        except OutputError as exc:
            fail(exc.line())
        out.print(f"wrote {markdown_path}", markup=False, highlight=False)
    if json_path is not None:
        out.print(f"wrote {json_path}", markup=False, highlight=False)
