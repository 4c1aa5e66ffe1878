"""The ``nodice`` command line: the one front door, every command in this package.

Each module holds one command group and registers it on :data:`app`; heavy modules
(torch, triton, the evaluation service) load inside the commands, so ``nodice --help``
stays fast. Failures end in :func:`nodice.cli.common.fail`: one line, one exit code.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from nodice.cli import audit, bench, catalog, check, evolve, export, mcp, run
from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Batch-invariance gate and evolutionary search for GPU kernels.",
)
for _group in (check, catalog, evolve, run, mcp, bench, audit, export):
    _group.register(app)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `nodice` alone, `nodice bench`: the help
            exc.show()  # type: ignore[attr-defined]
            sys.exit(EXIT_ERROR)
        # An option or argument the parser refused: one line (and the one JSON object under --json),
        # as every other error, rather than the parser's framed box.
        _usage_error(exc)
    except NodiceError as exc:  # pragma: no cover - commands handle their own
        print(exc.line(), file=sys.stderr)
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


def _usage_error(exc: Exception) -> NoReturn:
    import json

    formatted = getattr(exc, "format_message", None)
    message = " ".join((formatted() if callable(formatted) else str(exc)).split())
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    line = f"usage: {message}{where}"
    if "--json" in sys.argv[1:]:
        print(json.dumps({"verdict": "error", "error": line, "reason": line, "exit_code": EXIT_ERROR}))
    print(line, file=sys.stderr)
    sys.exit(EXIT_ERROR)
