"""Module-level pins in static analysis: a branch that a literal module constant switches off is dead
for every batch (no finding); the same branch with the pin on, or with a pin something can rebind,
is still a batch-dependent choice."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from nodice.gate.static.pins import module_pins, short_circuit, truth
from tests.test_static_patterns import analyze

# Two launches that tile the row differently: a real algorithm choice whenever the branch can run.
SWITCHED = """
    FAST_PATH = {pin}

    def kernel(x, weight, eps):
        y = torch.empty_like(x)
        if {test}:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
        else:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
        return y
    """


def _choices(tmp_path: Path, body: str) -> list[str]:
    violations, _ = analyze(tmp_path, body)
    return [f.mechanism for f in violations]


@pytest.mark.parametrize(
    "test",
    [
        "FAST_PATH and x.shape[0] < 16",
        "x.shape[0] < 16 and FAST_PATH",
        "not (not FAST_PATH or x.shape[0] > 8)",
        "FAST_PATH == 1 and x.shape[0] < 16",
        "0 < FAST_PATH <= 4 and x.shape[0] < 16",
    ],
)
def test_a_branch_a_pin_switches_off_is_no_choice(tmp_path: Path, test: str) -> None:
    assert _choices(tmp_path, SWITCHED.format(pin=0, test=test)) == []
    # The same branch with the pin on is the batch-dependent choice it reads as.
    assert _choices(tmp_path, SWITCHED.format(pin=1, test=test)) == ["algorithm_selection"]


def test_a_pin_decided_true_runs_the_taken_side_only(tmp_path: Path) -> None:
    body = SWITCHED.format(pin=1, test="FAST_PATH or x.shape[0] < 16")
    assert _choices(tmp_path, body) == []


# A pinned path that returns first: what follows it never runs while the pin is on.
RETURNS_FIRST = """
    SPLIT = {pin}

    def kernel(x, weight, eps):
        y = torch.empty_like(x)
        if SPLIT:
            if x.shape[1] > 4096:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=4096)
                return y
            {last}
        if x.shape[0] < 16:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
        else:
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
        return y
    """


def test_the_rest_of_a_body_after_a_pinned_return_is_no_choice(tmp_path: Path) -> None:
    returns = "_row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)\n            return y"
    assert _choices(tmp_path, RETURNS_FIRST.format(pin=1, last=returns)) == []
    # Pin off: the batch-dependent tile after it runs.
    assert _choices(tmp_path, RETURNS_FIRST.format(pin=0, last=returns)) == ["algorithm_selection"]
    # Pin on, but the pinned side can fall through (no return on one path): the rest can run.
    falls = "_row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)"
    assert _choices(tmp_path, RETURNS_FIRST.format(pin=1, last=falls)) == ["algorithm_selection"]


def test_a_helper_returning_a_switched_off_condition(tmp_path: Path) -> None:
    body = """
        SMALL_PATH = False

        def _small(m):
            return SMALL_PATH and m <= 16

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            if _small(x.shape[0]):
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
            else:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """
    assert _choices(tmp_path, body) == []
    assert _choices(tmp_path, body.replace("SMALL_PATH = False", "SMALL_PATH = True")) == [
        "algorithm_selection"
    ]


def test_a_conditional_expression_on_a_switched_off_pin(tmp_path: Path) -> None:
    body = """
        FAST_PATH = 0

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            tile = 256 if FAST_PATH and x.shape[0] < 16 else 1024
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile)
            return y
        """
    assert _choices(tmp_path, body) == []
    assert _choices(tmp_path, body.replace("FAST_PATH = 0", "FAST_PATH = 1")) != []


REBOUND = {
    "global_in_a_function": """
        def configure(x):
            global FAST_PATH
            FAST_PATH = 1
        """,
    "bound_twice": """
        FAST_PATH = 1
        """,
    "from_the_environment": """
        import os
        FAST_PATH = int(os.environ.get("FAST", "0"))
        """,
    "setattr_on_the_module": """
        import sys
        setattr(sys.modules[__name__], "FAST_PATH", 1)
        """,
}


@pytest.mark.parametrize("name", sorted(REBOUND))
def test_a_pin_something_can_rebind_is_an_ordinary_value(tmp_path: Path, name: str) -> None:
    body = textwrap.dedent(SWITCHED.format(pin=0, test="FAST_PATH and x.shape[0] < 16"))
    body += textwrap.dedent(REBOUND[name])
    assert _choices(tmp_path, body) == ["algorithm_selection"], name


def test_a_pin_another_file_of_the_folder_stores_to(tmp_path: Path) -> None:
    (tmp_path / "tuning.py").write_text("import cand\n\ndef turbo():\n    cand.FAST_PATH = 1\n")
    body = SWITCHED.format(pin=0, test="FAST_PATH and x.shape[0] < 16")
    assert _choices(tmp_path, body) == ["algorithm_selection"]


def test_a_local_of_the_same_name_shadows_the_pin(tmp_path: Path) -> None:
    body = """
        FAST_PATH = 0

        def kernel(x, weight, eps):
            FAST_PATH = x.shape[0] < 16
            y = torch.empty_like(x)
            if FAST_PATH:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
            else:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """
    assert _choices(tmp_path, body) == ["algorithm_selection"]


def test_module_pins_and_truth() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            A = 0
            B, C = 128, -6
            D: int = 1
            E = 2
            E = 3
            F = some_call()
            G = (1, 2)
            for H in range(3):
                pass
            H = 4
            """
        )
    )
    pins = module_pins(tree)
    assert pins == {"A": 0, "B": 128, "C": -6, "D": 1}
    test = ast.parse("A and n < 4 and undefined()", mode="eval").body
    assert isinstance(test, ast.BoolOp)
    assert truth(test, pins) is False and short_circuit(test, pins) == 1
    late = ast.parse("n < 4 and A", mode="eval").body
    assert isinstance(late, ast.BoolOp)
    assert truth(late, pins) is False and short_circuit(late, pins) == 2
    assert truth(ast.parse("n < 4 or D", mode="eval").body, pins) is True
    assert truth(ast.parse("n < 4 or A", mode="eval").body, pins) is None
    assert truth(ast.parse("not A", mode="eval").body, pins) is True
    assert truth(ast.parse("A", mode="eval").body, pins, local=frozenset({"A"})) is None
    # comparisons of pins and literals, chained as Python chains them; anything else undecided
    assert truth(ast.parse("B == 128", mode="eval").body, pins) is True
    assert truth(ast.parse("C < 0 < D <= 1", mode="eval").body, pins) is True
    assert truth(ast.parse("A is None", mode="eval").body, pins) is False
    assert truth(ast.parse("B > n", mode="eval").body, pins) is None
    assert truth(ast.parse("E == 3", mode="eval").body, pins) is None
    assert truth(ast.parse("B < 'x'", mode="eval").body, pins) is None
