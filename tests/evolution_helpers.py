"""Shared by the evolution and report tests: one real built-in run on CPU, made once per process."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from nodice.evolution.agents.builtin import BuiltinAgent
from nodice.evolution.engine import Engine, EvolveSummary
from nodice.evolution.start import EvolveOptions, prepare_run

# Seed + 3 candidates: enough for the operator to try a batch-adaptive rewrite and a sound one.
BUILTIN_BUDGET = 4


@functools.cache
def builtin_run() -> tuple[Path, EvolveSummary, str]:
    """A finished built-in run of rmsnorm on CPU: its folder, its summary and what it printed."""
    root = Path(tempfile.mkdtemp(prefix="nodice-evolve-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    run, config, _ = prepare_run(
        EvolveOptions(task="rmsnorm", run_dir=root / "run", device="cpu", budget=BUILTIN_BUDGET, rng_seed=0)
    )
    console = Console(record=True, width=200, force_terminal=False)
    summary = Engine(run, config, BuiltinAgent(rng_seed=0), console=console).execute()
    return run.root, summary, console.export_text()
