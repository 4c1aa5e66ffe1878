"""Shared by the evolution and report tests: one real built-in run on CPU, made once per test session.

Under pytest-xdist every worker is its own process, so the run is made by the
first worker that asks, under a file lock in the session's shared temporary
folder, and read back by the others.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from nodice.evolution.agents.builtin import BuiltinAgent
from nodice.evolution.engine import Engine, EvolveSummary
from nodice.evolution.start import EvolveOptions, prepare_run
from nodice.measuring.score import GBPS, BaselineScore, WorkloadScore

# Seed + 3 candidates: enough for the operator to try a batch-adaptive rewrite and a sound one.
BUILTIN_BUDGET = 4


def shared_folder(factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this session sees (the session's own one without xdist)."""
    base = factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``shared_folder()/name``, made by the first worker that asks (``make`` writes it at a partial
    path, renamed when done), under a file lock; the others wait for it and read it."""
    folder = shared_folder(factory)
    done = folder / name
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            partial = folder / f"{name}.partial"
            if partial.is_dir():
                shutil.rmtree(partial)
            partial.unlink(missing_ok=True)
            make(partial)
            partial.rename(done)
    return done


def builtin_run(factory: pytest.TempPathFactory) -> tuple[Path, EvolveSummary, str]:
    """A finished built-in run of rmsnorm on CPU: its folder, its summary and what it printed."""
    folder = shared_folder(factory)
    root, record = folder / "builtin-run", folder / "builtin-run.json"
    with open(folder / "builtin-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            run, config, _ = prepare_run(
                EvolveOptions(task="rmsnorm", run_dir=root, device="cpu", budget=BUILTIN_BUDGET, rng_seed=0)
            )
            console = Console(record=True, width=200, force_terminal=False)
            summary = Engine(run, config, BuiltinAgent(rng_seed=0), console=console).execute()
            fields = dataclasses.asdict(summary) | {"run_dir": str(summary.run_dir)}
            record.write_text(json.dumps({"summary": fields, "printed": console.export_text()}))
    data = json.loads(record.read_text())
    summary = EvolveSummary(**(data["summary"] | {"run_dir": Path(data["summary"]["run_dir"])}))
    return summary.run_dir, summary, data["printed"]


def throughput_scores(
    values: dict[str, float],
    baselines: dict[str, float],
    *,
    unit: str = GBPS,
    limit: float = 4000.0,
    bi: str | None = "pass",
) -> list[dict[str, object]]:
    """Score dicts as the evaluation service writes them: each workload at ``values[w]`` in ``unit``,
    every baseline at the same throughput on every workload, the fraction of a ``limit`` ceiling."""
    out = []
    for workload, value in values.items():
        s = WorkloadScore(
            workload, 1.0, unit=unit, throughput=value, score=value, limit_fraction=value / limit
        )
        s.set_baselines({n: BaselineScore(ms=1.0, throughput=t, bi=bi) for n, t in baselines.items()})
        out.append(s.to_dict())
    return out
