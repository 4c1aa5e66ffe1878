"""CLI commands of the evolution capability: ``evolve``, ``report`` and ``run eval|commit|status|…``.

``nodice run …`` is how an external coding agent (``--agent cmd:…``) works
inside a run: it finds the run from ``--run-dir``, ``NODICE_RUN_DIR`` or the
current folder, and goes through the same gate and commit rule as every agent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR, EXIT_PASS, EXIT_REJECTED

if TYPE_CHECKING:
    from nodice.evolution.session import RunSession

out = Console()
err = Console(stderr=True)

run_app = typer.Typer(
    no_args_is_help=True,
    help="Work inside a run (for external agents): evaluate, commit, status, lineage, knowledge.",
)

RunDirOption = Annotated[
    Path | None, typer.Option("--run-dir", help="the run (default: NODICE_RUN_DIR or the current folder)")
]


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def evolve(
    task: Annotated[str | None, typer.Argument(help="task name (see `nodice tasks`)")] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="evolve a ModelNew for this PyTorch reference (Model, get_inputs, get_init_inputs) "
            "instead of a task; without --seed the seed is the reference's Model itself",
        ),
    ] = None,
    batch_axis: Annotated[
        int | None, typer.Option("--batch-axis", help="with --reference: the batch axis of every tensor (0)")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="run directory (default: runs/TASK); resumed if it exists")
    ] = None,
    agent: Annotated[str | None, typer.Option(help='builtin | openai | anthropic | cmd:"COMMAND"')] = None,
    model: Annotated[str | None, typer.Option(help="model name for an LLM agent")] = None,
    budget: Annotated[
        int | None, typer.Option(help="total evaluations of the run (default: 12 on cpu, 60 on cuda)")
    ] = None,
    time_budget: Annotated[float | None, typer.Option(help="total wall-clock seconds of the run")] = None,
    seed: Annotated[Path | None, typer.Option(help="seed kernel (default: the task's example seed)")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
    knowledge: Annotated[list[Path] | None, typer.Option("--knowledge", help="extra Markdown folder")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible or Anthropic endpoint")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY)")
    ] = None,
    rng_seed: Annotated[int | None, typer.Option(help="random seed of the built-in operator")] = None,
    stagnation: Annotated[
        int | None, typer.Option(help="evaluations without gain before the supervisor steps in")
    ] = None,
    report: Annotated[bool, typer.Option(help="write the HTML report at the end")] = True,
    bi: Annotated[
        bool | None,
        typer.Option(
            "--bi/--no-bi",
            help="--no-bi: the vanilla baseline search, commits judged on correctness and speed only "
            "(no BI stage runs); fixed for the life of a run",
        ),
    ] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option(
            "--workload",
            help="score on these workloads only: names or shell patterns such as 'gqa*' (see "
            "`nodice tasks TASK`), repeatable; fixed for the life of a run",
        ),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="local (worker processes on this machine) or ray (a Ray cluster)")
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="the Ray cluster (default: RAY_ADDRESS, or a local one)")
    ] = None,
    workers: Annotated[int, typer.Option(help="evaluations in flight at once")] = 1,
) -> None:
    """Evolve a fast, batch-invariant kernel for TASK; rerun on the same run dir to resume."""
    from nodice.evaluation.executor import ExecutorConfig
    from nodice.evolution.agents import make_agent
    from nodice.evolution.engine import Engine
    from nodice.evolution.start import EvolveOptions, existing_config, prepare_run

    for folder in knowledge or []:
        if not folder.is_dir():
            _fail(f"knowledge folder not found: {folder}")
    from nodice.references import task_from_options

    try:
        task = task_from_options(task, reference, batch_axis, "a TASK")
    except NodiceError as exc:
        _fail(exc.line())
    opts = EvolveOptions(
        task=task,
        run_dir=run_dir,
        agent=agent,
        model=model,
        budget=budget,
        time_budget_s=time_budget,
        seed=seed,
        device=device,
        knowledge_dirs=list(knowledge or []),
        base_url=base_url,
        rng_seed=rng_seed,
        stagnation_window=stagnation,
        bi=bi,
        workloads=list(workload) if workload else None,
        remote_workers=executor == "ray",
    )
    try:
        spread = ExecutorConfig(executor, workers, ray_address).validate()
        # The agent first: a missing key or a bad spec must not leave a run directory behind.
        known = existing_config(opts)
        agent_spec = opts.agent or (known.agent if known else "builtin")
        # The builtin agent proposes N candidates at a time; LLM and command agents run as N islands.
        islands = workers if agent_spec != "builtin" else 1
        agents = [
            make_agent(
                agent_spec,
                model=opts.model or (known.model if known else None),
                base_url=opts.base_url or (known.base_url if known else None),
                api_key=api_key,
                rng_seed=opts.rng_seed if opts.rng_seed is not None else (known.rng_seed if known else 0),
            )
            for _ in range(islands)
        ]
        run, config, resumed = prepare_run(opts)
        if resumed:
            out.print(f"resuming the run in {run.root}", highlight=False)
        if not config.bi:
            out.print("vanilla run (--no-bi): commits need correctness and speed only", highlight=False)
        if config.workloads:
            out.print(
                f"scored on {len(config.workloads)} workloads: {', '.join(config.workloads)}", highlight=False
            )
        if islands > 1:
            out.print(f"{islands} {agent_spec.partition(':')[0]} islands on one lineage", highlight=False)
        engine = Engine(run, config, agents[0], console=out, executor=spread, islands=agents)
        summary = engine.execute()
    except NodiceError as exc:
        _fail(exc.line())
    out.print(
        f"{summary.evaluations} evaluations, {summary.commits} committed versions; best "
        f"{summary.best_text()}; stopped: {summary.stop_reason or 'done'}",
        highlight=False,
        soft_wrap=True,
    )
    if report:
        _write_report(summary.run_dir)


def _write_report(run_dir: Path) -> None:
    from nodice.report import write_report

    try:
        path = write_report(run_dir)
    except NodiceError as exc:
        _fail(exc.line())
    out.print(f"report: {path}", highlight=False, soft_wrap=True)


def report(run: Annotated[Path, typer.Argument(help="run directory")]) -> None:
    """Write RUN/report.html (self-contained) and its PNG plots; print the path."""
    _write_report(run)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def compare(
    run_a: Annotated[Path, typer.Argument(help="the BI-aware run")],
    run_b: Annotated[Path, typer.Argument(help="the vanilla run (nodice evolve --no-bi)")],
    json_file: Annotated[
        Path | None, typer.Option("--json", help="also write the figures as JSON here")
    ] = None,
    all_versions: Annotated[
        bool, typer.Option("--all-versions", help="judge every committed version, not only each best")
    ] = False,
    seed: Annotated[int, typer.Option(help="random seed of the gate's BI contexts")] = 0,
) -> None:
    """BI pass rate, speedup retention and intervention rate of two runs of one task on one device."""
    from rich.table import Table

    from nodice.evolution.compare import compare_runs
    from nodice.evolution.scores import value_text

    try:
        c = compare_runs(run_a, run_b, all_versions=all_versions, gate_seed=seed)
    except NodiceError as exc:
        _fail(exc.line())
    table = Table(title=f"{c.a.task} on {c.a.device}", box=None, padding=(0, 2))
    table.add_column("")
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    rows = [
        ("run", c.a.run_dir, c.b.run_dir),
        ("mode", c.a.mode, c.b.mode),
        ("evaluations", str(c.a.evaluations), str(c.b.evaluations)),
        ("committed versions", str(c.a.commits), str(c.b.commits)),
        ("best", *(f"v{f.best_version} {value_text(f.best_geomean, f.unit)}" for f in (c.a, c.b))),
        ("best judged by the gate", c.a.best_verdict or "-", c.b.best_verdict or "-"),
        (
            "BI pass rate" + (" (every version)" if all_versions else " (best)"),
            *map(_rate, (c.a.bi_pass_rate, c.b.bi_pass_rate)),
        ),
        (
            "intervention rate",
            *(f"{_rate(f.intervention_rate)} ({f.bi_rejections}/{f.evaluations})" for f in (c.a, c.b)),
        ),
    ]
    for row in rows:
        table.add_row(*row)
    out.print(table)
    retention = "-" if c.speedup_retention is None else f"{c.speedup_retention:.4g}"
    out.print(
        f"speedup retention (A best ÷ B best, geomean over {len(c.workloads)} workloads): {retention}",
        highlight=False,
    )
    for f in (c.a, c.b):
        failing: dict[tuple[str, str], list[str]] = {}
        for j in f.judged:
            if not j.passes:
                failing.setdefault((j.verdict, j.reason[:160]), []).append(f"v{j.version}")
        for (verdict, reason), names in failing.items():
            out.print(f"  {f.mode} {', '.join(names)}: {verdict} — {reason}", markup=False, highlight=False)
    for note in c.notes:
        out.print(f"note: {note}", style="dim", markup=False, highlight=False)
    if json_file is not None:
        from nodice.evolution.rundir import write_json_atomic

        try:
            json_file.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(json_file, c.to_dict())
        except OSError as exc:
            _fail(f"cannot write {json_file}: {exc}")
        out.print(f"json: {json_file}", highlight=False, soft_wrap=True)


# ---- nodice run … -----------------------------------------------------------------
def _find_run(run_dir: Path | None) -> Path:
    if run_dir is not None:
        return run_dir
    if os.environ.get("NODICE_RUN_DIR"):
        return Path(os.environ["NODICE_RUN_DIR"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "run.json").is_file():
            return folder
    _fail("not inside a run: pass --run-dir or set NODICE_RUN_DIR")


def _open_session(run_dir: Path | None) -> RunSession:
    from nodice.evaluation.executor import ExecutorConfig
    from nodice.evolution.rundir import RunDir
    from nodice.evolution.session import RunSession

    # Set by `nodice evolve` for the agent command it launches: its island, where to evaluate.
    island = os.environ.get("NODICE_ISLAND", "")
    run = RunDir(_find_run(run_dir), island=int(island) if island.isdigit() else None)
    if not run.exists():
        _fail(f"{run.root} is not a nodice run")
    kind = os.environ.get("NODICE_EXECUTOR", "local")
    address = os.environ.get("NODICE_RAY_ADDRESS") if kind == "ray" else None
    try:
        executor = ExecutorConfig(kind, 1, address).validate()
        return RunSession(run, run.load_config(), executor=executor)
    except NodiceError as exc:
        _fail(exc.line())


def _agent_name() -> str:
    return "cmd" if os.environ.get("NODICE_PROMPT_FILE") else "user"


@run_app.command("eval")
def run_eval(
    run_dir: RunDirOption = None,
    gate: Annotated[bool, typer.Option("--gate", help="the gate only, without the benchmark")] = False,
    message: Annotated[str, typer.Option("-m", "--message", help="what this edit tries")] = "",
) -> None:
    """Evaluate the workspace: gate verdict, diagnostics, per-workload scores, commit eligibility."""
    session = _open_session(run_dir)
    try:
        attempt = session.evaluate(
            agent=_agent_name(), label="nodice run eval", description=message, bench=not gate
        )
    except NodiceError as exc:
        _fail(exc.line())
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
    session = _open_session(run_dir)
    try:
        result = session.commit(agent=_agent_name(), description=message)
    except NodiceError as exc:
        _fail(exc.line())
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
    from nodice.evolution.directions import direction
    from nodice.evolution.scores import standing_text

    session = _open_session(run_dir)
    try:
        versions = session.versions()
        interventions = session.journal.interventions()
        current = interventions[-1].chosen if interventions else ""
        status = {
            "task": session.config.task,
            "device": session.config.device,
            "bi": session.config.bi,
            "evaluations": session.evaluations_done(),
            "evaluations_left": session.evaluations_left(),
            "versions": len(versions),
            "best": versions[-1].to_dict() if versions else None,
            "rejections": session.journal.rejections_by_reason(),
            "direction": current,
            "direction_text": direction(current).text if current else "",
            "islands": _island_counts(session),
        }
    finally:
        session.close()
    if as_json:
        print(json.dumps(status, indent=2))
        return
    best: dict[str, Any] | None = status["best"]  # type: ignore[assignment]
    mode = "" if status["bi"] else " (vanilla: commits need correctness and speed only)"
    print(f"task {status['task']} on {status['device']}{mode}")
    print(f"evaluations: {status['evaluations']}, left: {status['evaluations_left']}")
    if best:
        standing = standing_text(best["geomean"], best.get("unit"), best.get("ratio_best"))
        print(f"best: v{best['version']} geomean {standing} — {best['description']}")
    print(f"rejections: {status['rejections'] or 'none'}")
    if current:
        print(f"direction: {current} — {status['direction_text']}")
    for number, counts in status["islands"].items():  # type: ignore[attr-defined]
        print(f"island {number}: {counts['evaluations']} evaluations, {counts['commits']} commits")


def _island_counts(session: RunSession) -> dict[str, dict[str, int]]:
    """Evaluations and commits of each island, when several agents shared the lineage."""
    done = session.journal.count_by_island()
    commits: dict[int, int] = {}
    for v in session.versions():
        if v.island is not None:
            commits[v.island] = commits.get(v.island, 0) + 1
    return {
        str(k): {"evaluations": done.get(k, 0), "commits": commits.get(k, 0)}
        for k in sorted(set(done) | set(commits))
    }


@run_app.command("lineage")
def run_lineage(run_dir: RunDirOption = None) -> None:
    """Committed versions with their scores, oldest first."""
    from nodice.evolution.knowledge import KnowledgeBase
    from nodice.evolution.tools import AgentTools

    session = _open_session(run_dir)
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

    session = _open_session(run_dir)
    try:
        text = AgentTools(session, KnowledgeBase([]), _agent_name()).show_version(version, diff)
    finally:
        session.close()
    if text.startswith("error:"):
        _fail(text.removeprefix("error: "))
    print(text)


@run_app.command("search")
def run_search(
    query: Annotated[list[str], typer.Argument(help="keywords")],
    run_dir: RunDirOption = None,
) -> None:
    """Search the knowledge base (the starter set and the run's --knowledge folders)."""
    from nodice.evolution.knowledge import KnowledgeBase

    session = _open_session(run_dir)
    folders = [Path(d) for d in session.config.knowledge_dirs]
    session.close()
    print(KnowledgeBase(folders).render_search(" ".join(query), k=3))


def register(app: typer.Typer) -> None:
    app.command()(evolve)
    app.command()(report)
    app.command()(compare)
    app.add_typer(run_app, name="run")
