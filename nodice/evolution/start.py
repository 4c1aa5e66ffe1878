"""Create a run directory, or reopen one and apply the options given on resume.

A run is resumed only if its committed versions were scored in the unit its
task scores in now; one scored by an older nodice (speedup over the reference)
is refused before anything in it is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nodice.catalog import CATALOG
from nodice.errors import DeviceError, ReferenceFileError, UnknownTaskError
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.rundir import RunConfig, RunDir, RunDirError
from nodice.evolution.scores import refuse_incomparable, task_unit
from nodice.references import REFERENCE_ENTRY, is_reference_task, parse_task_name, reference_seed

PACKAGE_DIR = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = PACKAGE_DIR / "examples"
# Evaluations of a run when --budget is not given: a few minutes on 2 CPU cores with the interpreter.
DEFAULT_BUDGET = {"cpu": 12, "cuda": 60}


@dataclass
class EvolveOptions:
    """What ``nodice evolve`` was given; None means "keep the run's setting" on resume."""

    task: str
    run_dir: Path | None = None
    agent: str | None = None
    model: str | None = None
    budget: int | None = None
    time_budget_s: float | None = None
    seed: Path | None = None
    device: str | None = None
    knowledge_dirs: list[Path] = field(default_factory=list)
    base_url: str | None = None
    rng_seed: int | None = None
    stagnation_window: int | None = None
    # False: the vanilla baseline search (no BI stages); None keeps the run's setting on resume.
    bi: bool | None = None
    # Workload names or shell patterns (``gqa*``) to score on; None keeps the run's setting.
    workloads: list[str] | None = None
    # Candidates run on other machines (a Ray cluster): an explicit --device need not exist here.
    remote_workers: bool = False
    # Flags for a coding-agent CLI preset and the limit of one launch; None keeps the run's.
    agent_args: list[str] | None = None
    launch_timeout_s: float | None = None


def check_task_name(task: str) -> None:
    """Fail on an unknown task without importing the catalog (and PyTorch with it) in this process."""
    if is_reference_task(task):
        path = parse_task_name(task).path
        if not path.is_file():
            raise ReferenceFileError(f"no such reference file: {path}")
        return
    if task not in CATALOG:
        raise UnknownTaskError(f"'{task}' (known tasks: {', '.join(CATALOG)})")


def pick_device(device: str | None, remote: bool = False) -> str:
    """``cuda`` when asked for or, by default, when one is visible; ``cpu`` otherwise.

    ``remote``: the workers are on other machines, so an explicit device is taken as it is.
    """
    if device not in (None, "cpu", "cuda"):
        raise DeviceError(f"'{device}' (use cpu or cuda)")
    if device == "cpu" or (remote and device is not None):
        return device
    import torch  # only needed to look for a GPU

    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError("cuda requested but no CUDA device is visible")
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_run_dir(task: str) -> Path:
    """``runs/TASK``; ``runs/<file stem>`` for a reference file."""
    if is_reference_task(task):
        return Path("runs") / parse_task_name(task).path.stem
    return Path("runs") / task


def entry_for(task: str) -> str:
    return REFERENCE_ENTRY if is_reference_task(task) else "kernel"


def seed_source(task: str, seed: Path | None) -> str:
    if seed is None and is_reference_task(task):
        return reference_seed(parse_task_name(task).path)
    path = seed or EXAMPLES_DIR / task / "seed.py"
    if not path.is_file():
        where = f"{seed}" if seed else f"the task '{task}' ships no seed; pass --seed FILE"
        raise RunDirError(f"no seed kernel: {where}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"cannot read the seed {path}: {exc}") from None


def resolve_workloads(task: str, device: str, patterns: list[str]) -> list[str]:
    """The task's workload names (for ``device``) that match any of ``patterns``, in the task's order."""
    import fnmatch

    import torch

    from nodice.tasks import get_task

    names = [w.name for w in get_task(task).bench_workloads(torch.device(device))]
    missing = [p for p in patterns if not fnmatch.filter(names, p)]
    if missing:
        raise RunDirError(
            f"no {task} workload on {device} matches {', '.join(repr(p) for p in missing)} "
            f"(its workloads: {', '.join(names)})"
        )
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def existing_config(opts: EvolveOptions) -> RunConfig | None:
    """The configuration of the run ``opts`` would resume, if there is one."""
    run = RunDir(opts.run_dir or default_run_dir(opts.task))
    return run.load_config() if run.exists() else None


def refuse_lost_lineage(run: RunDir) -> None:
    """A run without its git lineage resumes from its seed only if it never committed a version: one
    whose journal records commits has lost its history, and starting it again at v0 would hide that."""
    if not run.store_path.is_file():
        return
    journal = Journal(run.store_path)
    try:
        committed = [a.version for a in journal.attempts() if a.outcome == "committed"]
    finally:
        journal.close()
    if committed:
        raise RunDirError(
            f"{run.root} has no lineage (.git) but its journal records {len(committed)} committed "
            "versions: restore the lineage or use a new run dir"
        )


def prepare_run(opts: EvolveOptions) -> tuple[RunDir, RunConfig, bool]:
    """The run directory and its configuration; True when an existing run is resumed."""
    check_task_name(opts.task)  # an unknown task fails here, before anything is written
    shown = opts.run_dir or default_run_dir(opts.task)
    run = RunDir(shown)
    resumed = run.exists()
    if resumed:
        config = run.load_config()
        if config.task != opts.task:
            raise RunDirError(f"{run.root} is a run of task '{config.task}', not '{opts.task}'")
        for folder in (run.home.workspace, run.scratch):
            if folder.exists() and not folder.is_dir():
                raise RunDirError(f"{folder} is not a folder: move it away to resume the run")
        config.unit = config.unit or task_unit(opts.task)
        if (run.root / ".git").is_dir():
            units = [v.unit for v in Lineage(run.root).versions()]
            refuse_incomparable(str(shown), units, config.unit)
        else:
            refuse_lost_lineage(run)
        if opts.device and opts.device != config.device:
            raise RunDirError(
                f"{run.root} runs on {config.device}; scores on {opts.device} would not compare "
                "(use a new run dir)"
            )
        if opts.bi is not None and opts.bi != config.bi:
            mode = "BI-aware" if config.bi else "vanilla (--no-bi)"
            raise RunDirError(
                f"{run.root} is a {mode} run; its commit rule cannot change (use a new run dir)"
            )
        if opts.workloads and resolve_workloads(opts.task, config.device, opts.workloads) != config.workloads:
            raise RunDirError(
                f"{run.root} is scored on {', '.join(config.workloads) or 'every workload'}; its workloads "
                "cannot change (use a new run dir)"
            )
        if opts.seed is not None:
            raise RunDirError(f"{run.root} already has a lineage; --seed only applies to a new run")
        for name in (
            "agent",
            "model",
            "budget",
            "time_budget_s",
            "base_url",
            "rng_seed",
            "stagnation_window",
            "agent_args",
            "launch_timeout_s",
        ):
            value = getattr(opts, name)
            if value is not None:
                setattr(config, name, value)
        known = set(config.knowledge_dirs)
        config.knowledge_dirs += [
            str(p.resolve()) for p in opts.knowledge_dirs if str(p.resolve()) not in known
        ]
        run.save_config(config)
    else:
        device = pick_device(opts.device, opts.remote_workers)
        config = RunConfig(
            task=opts.task,
            device=device,
            agent=opts.agent or "builtin",
            model=opts.model,
            budget=opts.budget if opts.budget is not None else DEFAULT_BUDGET.get(device),
            time_budget_s=opts.time_budget_s,
            knowledge_dirs=[str(p.resolve()) for p in opts.knowledge_dirs],
            base_url=opts.base_url,
            rng_seed=opts.rng_seed or 0,
            stagnation_window=opts.stagnation_window or 6,
            unit=task_unit(opts.task),
            entry=entry_for(opts.task),
            bi=opts.bi is not False,
            workloads=resolve_workloads(opts.task, device, opts.workloads) if opts.workloads else [],
            agent_args=list(opts.agent_args or []),
            launch_timeout_s=opts.launch_timeout_s,
        )
        run.create(config, seed_source(opts.task, opts.seed))
    lineage = Lineage(run.root)
    with run.writing():
        lineage.init()
        if not lineage.has_commits():
            origin = str(opts.seed) if opts.seed else f"the {opts.task} example seed"
            if opts.seed is None and is_reference_task(opts.task):
                origin = f"the reference {parse_task_name(opts.task).path.name} itself"
            lineage.commit_workspace(f"run: evolve {opts.task} from {origin}\n")
    return run, config, resumed
