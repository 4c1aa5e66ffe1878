"""Blocks at a module's top level (a ``for`` or ``while`` loop, a ``try``, a branch, a comprehension):
the names bound after them (the entry point's ``def``, classes, constants, imports) are bound in the
module's namespace as Python binds them, and what a loop's body binds still counts as possibly bound
only, never as a pin."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.result import Finding
from nodice.gate.static import run_static
from nodice.gate.static.contracts import contract_for
from nodice.gate.static.program import Analysis
from nodice.gate.static.report import Collector
from nodice.gate.static.sources import entry_signature
from nodice.gate.static.values import NO_CONST, V
from nodice.tasks import available, get_task
from tests.test_static_patterns import analyze

EXAMPLES = Path(__file__).resolve().parents[1] / "nodice" / "examples" / "rmsnorm"
VIOLATING = EXAMPLES / "split_rows_small_batch.py"
SEED = EXAMPLES / "seed.py"
NOT_VISIBLE = "is not defined where the analyzer can see it"

LOOPS = {
    "for": "for _i in range(1):\n    pass\n",
    "while_false": "while False:\n    pass\n",
    "for_else": "for _i in range(2):\n    _j = _i\nelse:\n    _j = 0\n",
    "nested": "for _i in range(2):\n    while _i:\n        _i -= 1\n",
}
# Other blocks that replace the environment at the top level: the same names must stay bound after them.
BLOCKS = {
    **LOOPS,
    "try": "try:\n    import _no_such_module\nexcept ImportError:\n    _no_such_module = None\n",
    "if_unknown": "import os\nif os.environ.get('NODICE_UNSET'):\n    _flag = 1\n",
    "comprehension": "_SQUARES = [i * i for i in range(4)]\n",
}


@pytest.fixture(autouse=True)
def _rmsnorm_installed() -> None:
    if "rmsnorm" not in available():
        pytest.skip("task rmsnorm is not installed")


def _run(tmp_path: Path, source: str, name: str = "cand.py") -> tuple[list[Finding], list[Finding]]:
    path = tmp_path / name
    path.write_text(source)
    return run_static(path, get_task("rmsnorm"))


def _shape(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return sorted((f.rule, f.mechanism, f.protected) for f in findings)


@pytest.mark.parametrize("block", BLOCKS)
def test_a_violation_after_a_top_level_block_is_still_found(tmp_path: Path, block: str) -> None:
    """The split-row example with a loop (or another block) prepended: the same findings as without it,
    and no note that the entry point is missing."""
    plain, _ = _run(tmp_path, VIOLATING.read_text(), "plain.py")
    assert plain, "the example itself must be a static violation"
    violations, unresolved = _run(tmp_path, BLOCKS[block] + VIOLATING.read_text())
    assert _shape(violations) == _shape(plain)
    assert {f.mechanism for f in violations} >= {"work_partitioning", "reduction_order"}
    assert not any(NOT_VISIBLE in f.message for f in unresolved)


@pytest.mark.parametrize("block", BLOCKS)
def test_the_invariant_seed_after_a_top_level_block_still_passes(tmp_path: Path, block: str) -> None:
    violations, unresolved = _run(tmp_path, BLOCKS[block] + SEED.read_text())
    assert violations == []
    assert not any(NOT_VISIBLE in f.message for f in unresolved)
    assert unresolved == _run(tmp_path, SEED.read_text(), "plain.py")[1]


# Every kind of binding after the loop: an import, a constant, a class, a function; the entry point
# reaches the launch through all of them.
AFTER_THE_LOOP = """
    for _i in range(3):
        pass
    import math as _math
    from functools import partial as _partial
    SMALL = 16

    class _Tiles:
        SMALL_TILE = 256
        LARGE_TILE = 1024

    def _launch(x, weight, y, eps, block):
        _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=block)

    def kernel(x, weight, eps):
        y = torch.empty_like(x)
        small = x.shape[0] < SMALL
        _launch(x, weight, y, eps, _Tiles.SMALL_TILE if small else _Tiles.LARGE_TILE)
        return y
    """


def test_every_statement_kind_after_a_top_level_loop_is_bound(tmp_path: Path) -> None:
    violations, unresolved = analyze(tmp_path, AFTER_THE_LOOP)
    assert [f.protected for f in violations] == ["BLOCK_H"]
    assert violations[0].mechanism == "reduction_order"
    assert not any(NOT_VISIBLE in f.message for f in unresolved)


def test_a_loop_in_a_class_body_keeps_the_methods_after_it(tmp_path: Path) -> None:
    """A class body is a namespace too: ``forward`` after a comprehension or a loop in it is a method."""
    source = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    _SIZES = [i for i in range(3)]
    for _i in range(2):
        pass

    def __init__(self, features: int):
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 0.5
"""
    path = tmp_path / "cand.py"
    path.write_text(source)
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert unresolved == []
    assert [f.rule for f in violations] == ["library_kernel_by_shape"]


def test_a_helper_module_with_a_top_level_loop_exports_what_follows_it(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(
        "for _i in range(1):\n    pass\n\n\ndef tile(n):\n    return 256 if n < 16 else 1024\n"
    )
    violations, unresolved = analyze(
        tmp_path,
        """
        from helpers import tile

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile(x.shape[0]))
            return y
        """,
    )
    assert [(f.mechanism, f.protected) for f in violations] == [("reduction_order", "BLOCK_H")]
    # Followed into the helper (not an unknown import whose result merely carries the batch).
    assert any(step.startswith("helpers.py line 6: return 256") for step in violations[0].path)
    assert not any(NOT_VISIBLE in f.message for f in unresolved)


# A switch that a literal module constant would pin off. Bound inside a loop's body, it may or may not
# be bound (and a second binding may change it): never a pin, so the branch stays a batch-dependent choice.
SWITCHED = """
    {prefix}
    def kernel(x, weight, eps):
        y = torch.empty_like(x)
        if FAST_PATH and x.shape[0] < 16:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
        else:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
        return y
    """


@pytest.mark.parametrize(
    "prefix",
    [
        "for _ in range(1):\n        FAST_PATH = 0\n",
        "while False:\n        FAST_PATH = 0\n",
        "FAST_PATH = 0\n    for _ in range(1):\n        FAST_PATH = 1\n",
        "FAST_PATH = 0\n    while False:\n        FAST_PATH = 1\n",
    ],
    ids=["for", "while", "rebound_in_for", "rebound_in_while"],
)
def test_a_name_bound_in_a_top_level_loop_is_no_pin(tmp_path: Path, prefix: str) -> None:
    violations, unresolved = analyze(tmp_path, SWITCHED.format(prefix=prefix))
    assert [f.mechanism for f in violations] == ["algorithm_selection"]
    assert not any(NOT_VISIBLE in f.message for f in unresolved)
    # The control: the same switch as a plain top-level literal is a pin that turns the branch off.
    assert analyze(tmp_path, SWITCHED.format(prefix="FAST_PATH = 0\n"))[0] == []


def _module_env(tmp_path: Path, source: str) -> dict[str, V]:
    """The namespace the analysis binds for a module's top level (as ``run_static`` builds it)."""
    path = tmp_path / "mod.py"
    path.write_text(source)
    task = get_task("rmsnorm")
    contract = contract_for(task.contracts_of or task.name, task.family, [])
    signature = entry_signature(task.signature, contract, task.batch_symbol)
    mod = Analysis(contract, signature, tmp_path, Collector()).module(path, str(path), is_candidate=True)
    assert mod is not None
    return mod.env


def test_a_name_bound_in_a_top_level_loop_keeps_the_state_before_it(tmp_path: Path) -> None:
    """What the loop's body binds is joined with the value before the loop (the body may not run):
    no longer the constant either binding holds; what follows the loop is bound as written."""
    env = _module_env(
        tmp_path,
        "BLOCK = 1024\nfor _ in range(1):\n    BLOCK = 256\n    INNER = 64\nAFTER = 32\n\n\n"
        "def kernel(x):\n    return x\n",
    )
    assert env["BLOCK"].const is NO_CONST
    assert env["INNER"].const == 64  # bound only if the body ran: never any other value
    assert env["AFTER"].const == 32
    assert env["kernel"].kind == "func"
    env = _module_env(tmp_path, "BLOCK = 1024\nwhile False:\n    BLOCK = 256\nAFTER = 32\n")
    assert env["BLOCK"].const is NO_CONST and env["AFTER"].const == 32
