"""``nodice evolve``, ``nodice report`` and ``nodice compare``; ``nodice run …`` (how an external coding
agent works inside a run) is in :mod:`nodice.cli.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nodice.cli.common import fail, out, seconds_problem
from nodice.errors import NodiceError


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
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="with --reference: shrink the batch axis of get_inputs() to N"),
    ] = None,
    eval_mode: Annotated[
        bool,
        typer.Option("--eval-mode", help="with --reference: modules in eval mode (default: training mode)"),
    ] = False,
    run_dir: Annotated[
        Path | None, typer.Option(help="run directory (default: runs/TASK); resumed if it exists")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help='builtin | knobs | openai | anthropic | codex | claude-code | aider | cmd:"COMMAND"'
        ),
    ] = None,
    agent_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-arg",
            help="a flag for the codex, claude-code or aider CLI, passed as it is (repeatable; write "
            "--agent-arg=-c for a value that starts with a dash)",
        ),
    ] = None,
    knob: Annotated[
        list[str] | None,
        typer.Option(
            "--knob",
            help="with --agent knobs: search this declared knob only (repeatable); the others keep the "
            "best version's values",
        ),
    ] = None,
    launch_timeout: Annotated[
        float | None,
        typer.Option(
            help="seconds one launch of a command or CLI preset may run before it is relaunched "
            "(presets: 1800)"
        ),
    ] = None,
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
    from nodice.evolution.agents import KNOB_FLAG, make_agent
    from nodice.evolution.engine import Engine
    from nodice.evolution.start import EvolveOptions, existing_config, prepare_run

    for folder in knowledge or []:
        if not folder.is_dir():
            fail(f"knowledge folder not found: {folder}")
    problem = _budget_problem(budget, time_budget, stagnation, launch_timeout)
    if problem:
        fail(problem)
    from nodice.references import task_from_options

    try:
        task = task_from_options(task, reference, batch_axis, "a TASK", batch_size, eval_mode)
    except NodiceError as exc:
        fail(exc.line())
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
        agent_args=list(agent_arg or []) + [f"{KNOB_FLAG}{k}" for k in knob or []] or None,
        launch_timeout_s=launch_timeout,
    )
    try:
        spread = ExecutorConfig(executor, workers, ray_address).validate()
        # The agent first: a missing key or a bad spec must not leave a run directory behind.
        known = existing_config(opts)
        agent_spec = opts.agent or (known.agent if known else "builtin")
        same_agent = known is not None and known.agent == agent_spec
        agent_args = opts.agent_args
        if agent_args is None:
            agent_args = known.agent_args if known is not None and same_agent else []
        if not same_agent and known is not None and opts.agent_args is None:
            opts.agent_args = []  # another agent: the old agent's flags do not carry over
        # The builtin agent proposes N candidates at a time; LLM and command agents run as N islands.
        islands = workers if agent_spec not in ("builtin", "knobs") else 1
        agents = [
            make_agent(
                agent_spec,
                model=opts.model or (known.model if known else None),
                base_url=opts.base_url or (known.base_url if known else None),
                api_key=api_key,
                rng_seed=opts.rng_seed if opts.rng_seed is not None else (known.rng_seed if known else 0),
                agent_args=agent_args,
                launch_timeout_s=opts.launch_timeout_s or (known.launch_timeout_s if known else None),
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
        fail(exc.line())
    out.print(
        f"{summary.evaluations} evaluations, {summary.commits} committed versions; best "
        f"{summary.best_text()}; stopped: {summary.stop_reason or 'done'}",
        highlight=False,
        soft_wrap=True,
    )
    if report:
        _write_report(summary.run_dir)


def _budget_problem(
    budget: int | None, time_budget: float | None, stagnation: int | None, launch_timeout: float | None
) -> str:
    """What is wrong with the run's limits ("" when nothing is): counts of 1 or more, finite seconds."""
    for option, count in (("--budget", budget), ("--stagnation", stagnation)):
        if count is not None and count < 1:
            return f"{option} must be 1 or more, not {count}"
    time_problem = seconds_problem("--time-budget", time_budget)
    return time_problem or seconds_problem("--launch-timeout", launch_timeout)


def _write_report(run_dir: Path) -> None:
    from nodice.report import write_report

    try:
        path = write_report(run_dir)
    except NodiceError as exc:
        fail(exc.line())
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
        fail(exc.line())
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
            fail(f"cannot write {json_file}: {exc}")
        out.print(f"json: {json_file}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(evolve)
    app.command()(report)
    app.command()(compare)
