"""``nodice bench``: the kernel benchmark (``kernels``), the detector benchmark (``detector``), the
oracle that labels the detector pool (``label``) and generation end to end in transformers (``e2e``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from nodice.bench.detector.pool import LABELS_FILE, OracleLabel, default_root, load_pool
from nodice.bench.detector.report import markdown, render
from nodice.bench.detector.run import MODES, CandidateRun, load_runs, rescore, run_detector, run_meta
from nodice.bench.output import OutputError, write_report
from nodice.cli.bench_e2e import e2e
from nodice.cli.common import err, fail, out, outputs_problem, seconds_problem, seed_problem, wrote
from nodice.errors import NodiceError

PoolOpt = Annotated[
    Path | None,
    typer.Option("--pool", help="pool folder holding labels.json and pool/ (default: bench/detector)"),
]
DeviceOpt = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")]
TaskOpt = Annotated[list[str] | None, typer.Option("--task", "-t", help="only these tasks")]
JobsOpt = Annotated[int, typer.Option("--jobs", "--workers", min=1, help="candidates in flight")]
ExecutorOpt = Annotated[
    str, typer.Option(help="local (worker processes on this machine) or ray (a Ray cluster)")
]
RayAddressOpt = Annotated[
    str | None, typer.Option(help="the Ray cluster (default: RAY_ADDRESS, or a local one)")
]
LimitOpt = Annotated[int | None, typer.Option(min=1, help="at most N candidates")]


def _device(name: str | None, remote: bool = False) -> str:
    """The device to judge on; ``remote`` (a Ray cluster) takes an explicit one without looking here."""
    from nodice.gate.runtime import resolve_device

    if remote and name in ("cpu", "cuda"):
        return str(name)
    return resolve_device(name).type


def detector(
    device: DeviceOpt = None,
    pool: PoolOpt = None,
    labels: Annotated[Path | None, typer.Option(help="labels file (default: POOL/labels.json)")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the report as JSON to this file")
    ] = None,
    markdown_out: Annotated[
        Path | None, typer.Option("--markdown", help="write the table and its provenance as Markdown")
    ] = None,
    limit: LimitOpt = None,
    task: TaskOpt = None,
    split: Annotated[
        str | None, typer.Option(help="only the 'main' pool or the 'heldout' candidates (default: both)")
    ] = None,
    jobs: JobsOpt = 1,
    seed: Annotated[int, typer.Option(help="the gate's random seed for every candidate")] = 0,
    warmup: Annotated[bool, typer.Option(help="warm-up run of the full gate before the timed runs")] = True,
    timeout: Annotated[float, typer.Option(help="seconds per candidate (all configurations)")] = 1800.0,
    progress_out: Annotated[
        Path | None,
        typer.Option(
            "--progress",
            help="write each candidate's result to this JSON-lines file as it finishes (a file that "
            "already holds results is continued with --resume, never overwritten)",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(help="with --progress: skip the candidates that file already holds, append the rest"),
    ] = False,
    rescore_from: Annotated[
        Path | None,
        typer.Option(
            "--rescore", help="score an earlier report (or --progress file) against the current labels"
        ),
    ] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Detection and false-rejection rates of static-only, dynamic-only and the full gate on the pool."""
    from nodice.evaluation.executor import ExecutorConfig

    outputs = (("--json", json_out), ("--markdown", markdown_out), ("--progress", progress_out))
    inputs = (("--labels", labels or (pool or default_root()) / LABELS_FILE), ("--rescore", rescore_from))
    problem = seed_problem(seed) or seconds_problem("--timeout", timeout) or outputs_problem(outputs, inputs)
    if not problem and resume and progress_out is None:
        problem = "--resume continues a --progress file: give --progress FILE"
    if not problem and progress_out is not None and not resume and _holds_data(progress_out):
        problem = (
            f"--progress {progress_out} already holds results: add --resume to continue it, "
            "or name another file"
        )
    if problem:
        fail(problem)
    try:
        ExecutorConfig(executor, jobs, ray_address).validate()
        dev = _device(device, remote=executor == "ray")
        the_pool = load_pool(pool or default_root(), labels)
    except NodiceError as exc:
        fail(exc.line())
        return
    problem = _unknown_tasks(task, the_pool)
    if problem:
        fail(problem)

    done_before: list[CandidateRun] = []
    if progress_out is not None and resume and progress_out.exists():
        try:
            done_before = load_runs(progress_out)[1]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            fail(f"cannot resume from {progress_out}: {type(exc).__name__}: {exc}")
        err.print(f"resuming: {len(done_before)} candidate(s) already in {progress_out}", markup=False)
    elif progress_out is not None:  # a new file, or an empty one: nothing in it to lose
        try:
            write_report(progress_out, json.dumps(run_meta(dev, seed, warmup)) + "\n", "--progress")
        except OutputError as exc:
            fail(exc.line())

    def progress(run: CandidateRun) -> None:
        verdicts = "  ".join(f"{m}={run.modes[m].verdict}" for m in MODES)
        err.print(f"{run.key} [{run.label}] {verdicts}", markup=False, highlight=False)
        if progress_out is not None:
            try:
                with progress_out.open("a") as f:
                    f.write(json.dumps(asdict(run)) + "\n")
            except OSError as exc:
                why = exc.strerror or exc
                raise OutputError(f"--progress {progress_out}: cannot write it ({why})") from None

    if rescore_from is not None:
        try:
            report = rescore(the_pool, dev, rescore_from, split)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            fail(f"cannot rescore {rescore_from}: {type(exc).__name__}: {exc}")
            return
    else:
        try:
            report = run_detector(
                the_pool,
                dev,
                limit=limit,
                tasks=task,
                jobs=jobs,
                seed=seed,
                warmup=warmup,
                timeout_s=timeout,
                on_done=progress,
                done_before=done_before,
                split=split,
                ray_address=ray_address,
                on_ray=executor == "ray",
            )
        except NodiceError as exc:  # e.g. no Ray cluster at the address
            fail(exc.line())
            return
    if report.candidates_labeled == 0:
        fail(f"no candidate in the pool has a {dev} label (run `nodice bench label --device {dev}`)")
    render(report, out)
    for option, path, text in (
        ("--json", json_out, json.dumps(report.to_dict(), indent=1) + "\n"),
        ("--markdown", markdown_out, markdown(report)),
    ):
        if path is not None:
            try:
                write_report(path, text, option)
            except OutputError as exc:
                fail(exc.line())
            out.print(f"wrote {path}", markup=False, highlight=False)


def _holds_data(path: Path) -> bool:
    """Whether ``path`` is a file with something in it (what a fresh run would overwrite)."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def label(
    device: DeviceOpt = None,
    pool: PoolOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="labels file (default: POOL/labels.json)")
    ] = None,
    task: TaskOpt = None,
    candidate: Annotated[list[str] | None, typer.Option(help="only these candidate keys (task/name)")] = None,
    limit: LimitOpt = None,
    jobs: JobsOpt = 1,
    timeout: Annotated[float, typer.Option(help="seconds per candidate")] = 1800.0,
    missing: Annotated[
        bool,
        typer.Option(
            "--missing",
            help="only the candidates without a current label for the device (resumes a stopped run)",
        ),
    ] = False,
) -> None:
    """Label the pool with the brute-force oracle on one device (other devices' labels are kept)."""
    from nodice.bench.detector.labeling import label_pool

    problem = seconds_problem("--timeout", timeout) or outputs_problem((("--out", out_file),))
    if problem:
        fail(problem)

    def progress(key: str, lab: OracleLabel) -> None:
        took = lab.evidence.get("seconds")
        shown = f" ({took:.1f} s)" if isinstance(took, (int, float)) else ""
        err.print(f"{key}: {lab.label} — {lab.reason}{shown}", markup=False, highlight=False)

    try:
        dev = _device(device)
        root = pool or default_root()
        result = label_pool(
            root,
            dev,
            labels=out_file,
            tasks=task,
            keys=candidate,
            limit=limit,
            jobs=jobs,
            timeout_s=timeout,
            on_done=progress,
            missing=missing,
        )
    except NodiceError as exc:
        fail(exc.line())
        return
    path = out_file or root / LABELS_FILE
    counts: dict[str, int] = {}
    for e in result.entries:
        lab = e.label(dev) or "unlabeled"
        counts[lab] = counts.get(lab, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    out.print(f"{dev} labels: {summary}; wrote {path}", markup=False, highlight=False)


def _unknown_tasks(tasks: list[str] | None, pool: Any) -> str:
    """Why a --task names no candidate of the pool ("" when every one does)."""
    known = sorted({e.spec.task for e in pool.entries})
    unknown = [t for t in tasks or [] if t not in known]
    if not unknown:
        return ""
    return f"--task {', '.join(unknown)}: no candidate of the pool has that task (tasks: {', '.join(known)})"


def _chosen_workloads(items: list[str], tasks: list[str], device: str) -> dict[str, list[str]]:
    """``[TASK:]NAME`` items as task → workload names; a bare NAME picks the tasks that have it."""
    import torch

    from nodice.tasks import get_task

    known = {t: [w.name for w in get_task(t).bench_workloads(torch.device(device))] for t in tasks}
    chosen: dict[str, list[str]] = {}
    for item in items:
        t, sep, name = item.rpartition(":")
        owners = [t] if sep else [tn for tn in tasks if name in known[tn]]
        if sep and t not in known:
            raise NodiceError(f"--workload {item}: task {t} is not among the benchmarked tasks")
        if not owners or any(name not in known[o] for o in owners):
            raise NodiceError(f"--workload {item}: no such {device} workload (see `nodice tasks`)")
        for o in owners:
            chosen.setdefault(o, []).append(name)
    return chosen


def kernels(
    device: DeviceOpt = None,
    task: TaskOpt = None,
    workload: Annotated[
        list[str] | None,
        typer.Option("--workload", "-w", help="only these workloads (TASK:NAME or NAME; repeatable)"),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the report (SPEC §6) to this file, after every task")
    ] = None,
    markdown_out: Annotated[
        Path | None, typer.Option("--markdown", help="write the tables and their provenance as Markdown")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="with --json: keep the tasks that file already holds, run the others")
    ] = False,
    seed: Annotated[int, typer.Option(help="random seed of the gate and the workload inputs")] = 0,
    timeout: Annotated[
        float, typer.Option(help="seconds per task (gate, benchmark, baseline audits), and per warm-up job")
    ] = 1200.0,
    warm_workers: Annotated[
        int | None,
        typer.Option(
            "--warm-workers",
            min=0,
            help="processes that compile and audit side by side before anything is timed "
            "(default: about one per core, at most 8; 0: no warm-up phase)",
        ),
    ] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "--workers", min=1, help="with --executor ray: tasks in flight")
    ] = 8,
) -> None:
    """Every task's best bundled kernel against every library baseline, timed in one run.

    First a warm-up phase builds every kernel the run will need and audits every baseline for
    batch invariance, in parallel; then the tasks are measured one after another on an idle device.
    With --executor ray the tasks are measured side by side, one per GPU (or CPU) of the cluster,
    without the warm-up phase.
    """
    problem = (
        seed_problem(seed)
        or seconds_problem("--timeout", timeout)
        or outputs_problem((("--json", json_out), ("--markdown", markdown_out)))
    )
    if problem:
        fail(problem)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from nodice.bench.kernels import load_report, run_kernel_bench
    from nodice.bench.kernels_table import markdown as kernels_markdown
    from nodice.bench.kernels_table import render_task
    from nodice.evaluation.executor import ExecutorConfig
    from nodice.tasks import CATALOG

    try:
        spread = ExecutorConfig(executor, jobs, ray_address).validate()
        dev = _device(device, remote=executor == "ray")
    except NodiceError as exc:
        fail(exc.line())
        return
    names = list(task or CATALOG)
    unknown = [t for t in names if t not in CATALOG]
    if unknown:
        fail(f"unknown task(s): {', '.join(unknown)} (known: {', '.join(CATALOG)})")
    if resume and json_out is None:
        fail("--resume needs --json FILE (the report to continue)")
    try:
        chosen = _chosen_workloads(workload or [], names, dev)
        if resume and json_out is not None and json_out.exists():
            load_report(json_out)  # a report that cannot be continued: one line, before any work
    except NodiceError as exc:
        fail(exc.line())
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
    )
    with progress:
        bar = progress.add_task("kernels", total=len(names))

        warm_bar: list[Any] = []

        def warming(total: int, result: Any) -> None:
            if result is None:
                warm_bar.append(progress.add_task("warm-up: compiles and audits", total=total))
                return
            progress.update(warm_bar[0], advance=1, description=f"warm-up: {result.job.label()}"[:70])

        def started(t: str, kernel: Path) -> None:
            progress.update(bar, description=f"{t}: gate + benchmark of {kernel.name}")

        def done(t: str, entry: dict) -> None:  # type: ignore[type-arg]
            progress.advance(bar)
            render_task(t, entry, out)

        try:
            report = run_kernel_bench(
                dev,
                names,
                seed=seed,
                timeout_s=timeout,
                workloads=chosen or None,
                json_path=json_out,
                resume=resume,
                on_start=started,
                on_done=done,
                warm_workers=warm_workers,
                on_warm=warming,
                executor=spread if executor == "ray" else None,
            )
        except NodiceError as exc:
            fail(exc.line())
            return
    wrote(markdown_out, lambda: kernels_markdown(report), json_out)
    failed = [t for t, e in report["tasks"].items() if e.get("verdict") != "pass"]
    if failed:
        err.print(f"not passing the gate on {dev}: {', '.join(failed)}", markup=False, highlight=False)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    bench = typer.Typer(
        no_args_is_help=True, help="Benchmarks: nodice's kernels against the libraries, and its gate."
    )
    bench.command("kernels")(kernels)
    bench.command("detector")(detector)
    bench.command("label")(label)
    bench.command("e2e")(e2e)
    app.add_typer(bench, name="bench")
