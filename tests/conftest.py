from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tests.cli_fork import CliForker

# Without a GPU every verdict runs Triton under its interpreter; set it before any candidate is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "nodice" / "examples"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def shared_fork_server() -> Iterator[None]:
    """One fork server per test process for the command lines the tests run, as `nodice evolve` gives
    one to its agents: each CPU worker a fork of a process that imported torch once, not one per run."""
    from nodice.evaluation.forkserver import ADDRESS_VARIABLE, SharedForkServer, forking_enabled
    from nodice.evaluation.limits import clean_environment
    from nodice.evaluation.workers import PACKAGE_ROOT

    if not forking_enabled("cpu"):
        yield
        return
    shared = SharedForkServer(clean_environment(PACKAGE_ROOT, None))
    os.environ[ADDRESS_VARIABLE] = shared.address
    try:
        yield
    finally:
        os.environ.pop(ADDRESS_VARIABLE, None)
        shared.close()


_FORKER: CliForker | None = None


@pytest.fixture(scope="session", autouse=True)
def cli_forker(shared_fork_server: None) -> Iterator[None]:
    """The command lines' fork server (:mod:`tests.cli_fork`): torch imported once per test process
    rather than once per command. ``NODICE_TEST_CLI_SPAWN=1`` spawns a new interpreter for each."""
    global _FORKER
    if os.environ.get("NODICE_TEST_CLI_SPAWN") == "1":
        yield
        return
    _FORKER = CliForker(dict(os.environ))
    try:
        yield
    finally:
        forker, _FORKER = _FORKER, None
        forker.close()


def run_cli(*args: str, timeout: float = 300, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m nodice ARGS`` in ``cwd`` as a user would, in a process of its own."""
    if _FORKER is not None:
        return _FORKER.run(list(args), cwd, timeout)
    return subprocess.run(
        [sys.executable, "-m", "nodice", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def load_kernel(path: Path, name: str) -> ModuleType:
    """A fresh module from ``path`` under ``name`` (pins set on one copy stay in that copy); on CPU,
    under the interpreter with the gate's deterministic ``tl.dot``, as the gate runs candidates."""
    from nodice.gate.runtime import prepare

    prepare(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
