"""What every command shares: the two consoles, one way to fail, the verdicts' colours."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console

from nodice.gate.result import EXIT_ERROR

out = Console()
err = Console(stderr=True)

VERDICT_STYLE = {
    "pass": "bold green",
    "bi_violation": "bold red",
    "incorrect": "bold yellow",
    "cheat": "bold magenta",
    "not_applicable": "bold cyan",
    "error": "bold red",
}

DeviceOpt = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")]


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """One line on stderr (never wrapped: it may be a file) and the exit code: the CLI's only error path."""
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)
