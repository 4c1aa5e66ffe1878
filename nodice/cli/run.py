"""``nodice run eval|commit|status|lineage|show|search``: how an external coding agent works in a run.

An agent launched by ``nodice evolve --agent cmd:…`` finds its run from ``--run-dir``,
``NODICE_RUN_DIR`` or the current folder, and goes through the same gate and commit rule as every
agent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from nodice.cli.common import fail
from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR, EXIT_PASS, EXIT_REJECTED

if TYPE_CHECKING:
    from nodice.evolution.session import RunSession

run_app = typer.Typer(
    no_args_is_help=True,
    help="Work inside a run (for external agents): evaluate, commit, status, lineage, knowledge.",
)

RunDirOption = Annotated[
    Path | None, typer.Option("--run-dir", help="the run (default: NODICE_RUN_DIR or the current folder)")
]


def _find_run(run_dir: Path | None) -> Path:
    if run_dir is not None:
        return run_dir
    if os.environ.get("NODICE_RUN_DIR"):
        return Path(os.environ["NODICE_RUN_DIR"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "run.json").is_file():
            return folder
    fail("not inside a run: pass --run-dir or set NODICE_RUN_DIR")


def open_session(run_dir: Path | None, as_json: bool = False) -> RunSession:
    """The run's session, or one line and exit 2 (after one JSON object naming the error, with
    ``as_json``)."""
    from nodice.evaluation.executor import ExecutorConfig
    from nodice.evolution.rundir import RunDir
    from nodice.evolution.session import RunSession

    def refuse(line: str) -> NoReturn:
        fail(line, json_object={"error": line, "exit_code": EXIT_ERROR} if as_json else None)

    # Set by `nodice evolve` for the agent command it launches: its island, where to evaluate.
    island = os.environ.get("NODICE_ISLAND", "")
    run = RunDir(_find_run(run_dir), island=int(island) if island.isdigit() else None)
    if not run.exists():
        refuse(f"{run.root} is not a nodice run")
    kind = os.environ.get("NODICE_EXECUTOR", "local")
    address = os.environ.get("NODICE_RAY_ADDRESS") if kind == "ray" else None
    try:
        executor = ExecutorConfig(kind, 1, address).validate()
        return RunSession(run, run.load_config(), executor=executor)
    except NodiceError as exc:
        refuse(exc.line())


def _agent_name() -> str:
    # Set by `nodice evolve` for the agent it launches (cmd, or a preset's name such as aider).
    return os.environ.get("NODICE_AGENT") or ("cmd" if os.environ.get("NODICE_PROMPT_FILE") else "user")


@run_app.command("eval")
def run_eval(
    run_dir: RunDirOption = None,
    gate: Annotated[bool, typer.Option("--gate", help="the gate only, without the benchmark")] = False,
    message: Annotated[str, typer.Option("-m", "--message", help="what this edit tries")] = "",
) -> None:
    """Evaluate the workspace: gate verdict, diagnostics, per-workload scores, commit eligibility."""
    session = open_session(run_dir)
    try:
        attempt = session.evaluate(
            agent=_agent_name(), label="nodice run eval", description=message, bench=not gate
        )
    except NodiceError as exc:
        fail(exc.line())
    finally:
        session.close()
    print(f"attempt #{attempt.id}\n{attempt.feedback}")
    raise typer.Exit(EXIT_PASS if attempt.verdict == "pass" else EXIT_REJECTED)


@run_app.command("commit")
def run_commit(
    message: Annotated[str, typer.Option("-m", "--message", help="what changed and why it is faster")],
    run_dir: RunDirOption = None,
) -> None:
    """Commit the workspace as a new version if it passes the gate and is at least as fast as the best."""
    session = open_session(run_dir)
    try:
        result = session.commit(agent=_agent_name(), description=message)
    except NodiceError as exc:
        fail(exc.line())
    finally:
        session.close()
    print(result.message)
    raise typer.Exit(EXIT_PASS if result.committed else EXIT_REJECTED)


@run_app.command("status")
def run_status(
    run_dir: RunDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Best version, evaluations and budget, rejections, the supervisor's current direction."""
    from nodice.evolution.status import run_status as status_of

    session = open_session(run_dir, as_json)
    try:
        status = status_of(session)
    finally:
        session.close()
    print(json.dumps(status.to_dict(), indent=2) if as_json else status.text())


@run_app.command("lineage")
def run_lineage(run_dir: RunDirOption = None) -> None:
    """Committed versions with their scores, oldest first."""
    from nodice.evolution.knowledge import KnowledgeBase
    from nodice.evolution.tools import AgentTools

    session = open_session(run_dir)
    try:
        print(AgentTools(session, KnowledgeBase([]), _agent_name()).list_lineage())
    finally:
        session.close()


@run_app.command("show")
def run_show(
    version: Annotated[int, typer.Argument(help="version number")],
    run_dir: RunDirOption = None,
    diff: Annotated[bool, typer.Option(help="the diff against the previous version")] = False,
) -> None:
    """The source of a committed version, or its diff."""
    from nodice.evolution.knowledge import KnowledgeBase
    from nodice.evolution.tools import AgentTools

    session = open_session(run_dir)
    try:
        text = AgentTools(session, KnowledgeBase([]), _agent_name()).show_version(version, diff)
    finally:
        session.close()
    if text.startswith("error:"):
        fail(text.removeprefix("error: "))
    print(text)


@run_app.command("search")
def run_search(
    query: Annotated[list[str], typer.Argument(help="keywords")],
    run_dir: RunDirOption = None,
) -> None:
    """Search the knowledge base (the starter set and the run's --knowledge folders)."""
    from nodice.evolution.knowledge import KnowledgeBase

    session = open_session(run_dir)
    folders = [Path(d) for d in session.config.knowledge_dirs]
    session.close()
    print(KnowledgeBase(folders).render_search(" ".join(query), k=3))


def register(app: typer.Typer) -> None:
    app.add_typer(run_app, name="run")
