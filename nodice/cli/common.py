"""What every command shares: the two consoles, one way to fail, the verdicts' colours."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def seconds_problem(option: str, seconds: float | None) -> str:
    """Why ``seconds`` cannot be a limit (not a finite positive number), or "" (also when not given)."""
    import math

    if seconds is None or (math.isfinite(seconds) and seconds > 0):
        return ""
    return f"{option} must be a positive number of seconds, not {seconds}"


def output_problem(option: str, path: Path | None) -> str:
    """Why ``path`` cannot be written as an output file (a folder, or under a file), or ""."""
    if path is None:
        return ""
    if path.is_dir():
        return f"{option} {path} is a folder: give a file name"
    for parent in path.parents:
        if parent.exists():
            return "" if parent.is_dir() else f"{option} {path}: {parent} is a file, not a folder"
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
    if markdown_path is not None:
        markdown_path.parent.mkdir(parents=True, exist_ok=True)
        markdown_path.write_text(markdown(), encoding="utf-8")
        out.print(f"wrote {markdown_path}", markup=False, highlight=False)
    if json_path is not None:
        out.print(f"wrote {json_path}", markup=False, highlight=False)
