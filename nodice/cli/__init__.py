"""The ``nodice`` command line: the one front door, every command in this package.

Each module holds one command group and registers it on :data:`app`; heavy modules
(torch, triton, the evaluation service) load inside the commands, so ``nodice --help``
stays fast. Failures end in :func:`nodice.cli.common.fail`: one line, one exit code.
"""

from __future__ import annotations

import sys

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
        app()
    except NodiceError as exc:  # pragma: no cover - commands handle their own
        print(exc.line(), file=sys.stderr)
        sys.exit(EXIT_ERROR)
