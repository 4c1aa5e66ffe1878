"""The knob search (``nodice evolve --agent knobs``): declarations read by the AST, TPE proposals
rebuilt from the journal, and real runs on CPU through the gate, the same-bits check and git."""

from __future__ import annotations

import itertools
import math
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from nodice.evolution.agents import AgentError, make_agent
from nodice.evolution.agents.knob_search import KnobSearchAgent, propose, settings_count
from nodice.evolution.agents.knobs import (
    KnobError,
    Setting,
    active,
    apply_setting,
    canonical,
    current_setting,
    parse_label,
    read_knobs,
    restrict,
    setting_label,
)
from nodice.evolution.engine import Engine
from nodice.evolution.lineage import Lineage
from nodice.evolution.session import RunSession
from nodice.evolution.start import EvolveOptions, prepare_run

KERNELS = Path(__file__).resolve().parents[1] / "nodice" / "kernels"


@pytest.mark.parametrize(
    "task",
    ["rmsnorm", "add_rmsnorm", "gemm", "attention_decode", "moe", "attention_prefill", "gdn", "sampling"],
)
def test_bundled_kernels_declare_knobs_at_their_shipped_values(task: str) -> None:
    source = (KERNELS / f"{task}.py").read_text()
    knobs = read_knobs(source)
    assert knobs
    shipped = current_setting(knobs)
    assert all(shipped[k.name] in k.choices for k in knobs)
    assert apply_setting(source, knobs, shipped) == source  # the declaration sets what ships


def test_a_setting_rewrites_its_literals_and_nothing_else() -> None:
    source = (KERNELS / "rmsnorm.py").read_text()
    knobs = read_knobs(source)
    setting = current_setting(knobs) | {"ROW_ELEMENTS": 8192, "WARPS_2K": 4, "STREAMING_HINTS": 1}
    edited = apply_setting(source, knobs, setting)
    changed = [(a, b) for a, b in zip(source.splitlines(), edited.splitlines(), strict=True) if a != b]
    assert changed == [
        ("ROW_ELEMENTS = 2048", "ROW_ELEMENTS = 8192"),
        ("WARPS_2K = 8", "WARPS_2K = 4"),
        ("STREAMING_HINTS = 0", "STREAMING_HINTS = 1"),
    ]
    assert current_setting(read_knobs(edited)) == setting
    assert parse_label(setting_label(setting)) == setting


def test_table_entries_and_launch_options_are_knobs() -> None:
    source = textwrap.dedent(
        """
        _TILES = {128: (128, 2), 64: (64, 3)}
        KNOBS = {"_TILES[128][0]": (64, 128, 256), "num_warps#2": (4, 8), "USE_FAST": (False, True)}
        USE_FAST = False

        def kernel(x):
            a = launch(x, num_warps=4)
            return launch(a, num_warps=4)
        """
    )
    knobs = read_knobs(source)
    assert {k.name: k.site.kind for k in knobs} == {
        "_TILES[128][0]": "table",
        "num_warps#2": "kwarg",
        "USE_FAST": "constant",
    }
    edited = apply_setting(source, knobs, {"_TILES[128][0]": 256, "num_warps#2": 8, "USE_FAST": True})
    assert "_TILES = {128: (256, 2), 64: (64, 3)}" in edited
    assert "launch(x, num_warps=4)" in edited and "launch(a, num_warps=8)" in edited
    assert "USE_FAST = True" in edited


@pytest.mark.parametrize(
    ("declaration", "says"),
    [
        ('KNOBS = {"NOPE": (1, 2)}', "no integer literal"),
        ('KNOBS = {"ROW_ELEMENTS": ()}', "non-empty tuple"),
        ('KNOBS = {"ROW_ELEMENTS": (1, 1)}', "repeats"),
        ('KNOBS = {"ROW_ELEMENTS": (1.5, 2)}', "non-negative integers"),
        ("KNOBS = make_knobs()", "literal dict"),
    ],
)
def test_a_bad_declaration_is_one_line(declaration: str, says: str) -> None:
    with pytest.raises(KnobError) as err:
        read_knobs(f"ROW_ELEMENTS = 2048\n{declaration}\n")
    assert says in err.value.line() and "\n" not in err.value.line()


def _walk(seed: int, steps: int) -> list[Setting]:
    """A search of the rmsnorm knobs against a fixed objective, each proposal rebuilt from the trials."""
    knobs = read_knobs((KERNELS / "rmsnorm.py").read_text())
    trials: list[tuple[Setting, float]] = []
    for _ in range(steps):
        setting = propose(knobs, trials, seed)
        assert setting is not None
        value = 1.0 / (1 + abs(int(setting["ROW_ELEMENTS"]) - 8192)) + 0.01 * int(setting["WARPS_2K"])
        trials.append((setting, value))
    return [s for s, _ in trials]


def test_seeded_proposals_repeat_and_never_repeat_a_setting() -> None:
    first, again, other = _walk(3, 14), _walk(3, 14), _walk(4, 14)
    assert first == again
    assert first != other
    assert len({setting_label(s) for s in first}) == len(first)


def test_a_spent_grid_proposes_nothing_and_seen_sources_are_skipped() -> None:
    knobs = read_knobs('A_BLOCK = 1\nB_BLOCK = 2\nKNOBS = {"A_BLOCK": (1, 2), "B_BLOCK": (2, 4)}\n')
    grid = [{"A_BLOCK": a, "B_BLOCK": b} for a in (1, 2) for b in (2, 4)]
    assert propose(knobs, [(s, 1.0) for s in grid], 0) is None
    left = propose(knobs, [(grid[0], 1.0)], 0, seen=lambda s: s in grid[1:3])
    assert left == grid[3]


def _run(root: Path, seed: Path | None, budget: int, rng_seed: int = 1) -> None:
    """A knob search on rmsnorm (``seed`` None: resume the run in ``root``)."""
    run, config, _ = prepare_run(
        EvolveOptions(task="rmsnorm", run_dir=root, device="cpu", budget=budget, seed=seed, rng_seed=rng_seed)
    )
    Engine(run, config, KnobSearchAgent(rng_seed=rng_seed), console=Console(quiet=True)).execute()


def test_a_knob_search_commits_passing_settings_and_resumes_without_repeats(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _run(root, KERNELS / "rmsnorm.py", budget=3)
    _run(root, None, budget=5)  # resumed: the sampler is rebuilt from the journal
    session = RunSession(*prepare_run(EvolveOptions(task="rmsnorm", run_dir=root))[:2])
    try:
        attempts = session.journal.attempts()
        knob_attempts = [a for a in attempts if a.agent == "knobs"]
        assert len(attempts) == 5 and len(knob_attempts) == 4
        assert len({a.label for a in knob_attempts}) == 4  # no setting twice, across the resume
        assert len({a.files_sha for a in attempts}) == 5  # nor any source
        for a in knob_attempts:
            assert a.stages["same_bits"] == "pass"  # row tiles and warps never change a bit
        committed = [a for a in attempts if a.outcome == "committed"]
        assert all(a.verdict == "pass" and set(a.stages.values()) == {"pass"} for a in committed)
        versions = Lineage(root).versions()
        assert [v.attempt for v in versions] == [a.id for a in committed]
        geomeans = [v.geomean for v in versions]
        assert geomeans == sorted(geomeans)
    finally:
        session.close()


# The weight applied before or after the row's scale: the same rmsnorm, rounded differently.
_ORDERED = """
import torch

WEIGHT_FIRST = 0
KNOBS = {"WEIGHT_FIRST": (0, 1)}


def kernel(x, weight, eps):
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    if WEIGHT_FIRST:
        y = xf * (weight.float() * rstd)
    else:
        y = (xf * rstd) * weight.float()
    return y.to(x.dtype)
"""


def test_a_setting_that_changes_bits_is_caught_and_never_timed(tmp_path: Path) -> None:
    seed = tmp_path / "ordered.py"
    seed.write_text(_ORDERED)
    root = tmp_path / "run"
    _run(root, seed, budget=3)
    session = RunSession(*prepare_run(EvolveOptions(task="rmsnorm", run_dir=root))[:2])
    try:
        attempts = session.journal.attempts()
        # The seed, the one other setting; then the grid is spent and the agent stops.
        assert [a.label for a in attempts] == ["seed", "knobs:WEIGHT_FIRST=1"]
        changed = attempts[1]
        assert changed.outcome == "bits_differ" and changed.verdict == "pass"
        assert changed.stages["same_bits"] == "reject" and "bench" not in changed.stages
        assert changed.scores == [] and changed.geomean == 0
        assert "where the best version gives" in changed.feedback
        assert [v.attempt for v in Lineage(root).versions()] == [attempts[0].id]
        refused = session.commit(agent="test", files=changed.files)
        assert not refused.committed and "rejected" in refused.message
    finally:
        session.close()


def test_an_order_knob_is_judged_by_the_gate_and_timed(tmp_path: Path) -> None:
    # The same two roundings, declared as a knob that reorders the arithmetic: the setting is a new
    # kernel, judged by the whole gate (correct and batch-invariant) and timed, not refused for its bits.
    seed = tmp_path / "ordered.py"
    seed.write_text(_ORDERED.replace('KNOBS = {"WEIGHT_FIRST"', 'ORDER_KNOBS = {"WEIGHT_FIRST"'))
    knobs = read_knobs(seed.read_text())
    assert [(k.name, k.reorders) for k in knobs] == [("WEIGHT_FIRST", True)]
    root = tmp_path / "run"
    _run(root, seed, budget=3)
    session = RunSession(*prepare_run(EvolveOptions(task="rmsnorm", run_dir=root))[:2])
    try:
        attempts = session.journal.attempts()
        assert [a.label for a in attempts] == ["seed", "knobs:WEIGHT_FIRST=1"]
        reordered = attempts[1]
        assert reordered.verdict == "pass" and reordered.outcome in ("committed", "slower")
        assert "same_bits" not in reordered.stages and reordered.stages["bench"] == "pass"
        assert reordered.geomean > 0 and reordered.scores
        assert "reorders a sum through WEIGHT_FIRST" in reordered.description
    finally:
        session.close()


def test_a_knob_in_both_declarations_is_one_line() -> None:
    source = (
        "ROW_ELEMENTS = 2048\n"
        'KNOBS = {"ROW_ELEMENTS": (1024, 2048)}\n'
        'ORDER_KNOBS = {"ROW_ELEMENTS": (2048, 4096)}\n'
    )
    with pytest.raises(KnobError) as err:
        read_knobs(source)
    assert "in both KNOBS and ORDER_KNOBS" in err.value.line() and "\n" not in err.value.line()
    assert "ORDER_KNOBS names 'NOPE'" in _bad('ORDER_KNOBS = {"NOPE": (1, 2)}')


def _bad(declaration: str) -> str:
    with pytest.raises(KnobError) as err:
        read_knobs(f"ROW_ELEMENTS = 2048\n{declaration}\n")
    return err.value.line()


# A split whose segment length is read only while the split is on, and a cap read only while the
# segment length is the longest (conditions chain).
_CONDITIONED = """
SPLIT = 0
SEG = 2048
CAP = 16
WARPS = 4
KNOBS = {"WARPS": (4, 8), "CAP": (16, 64)}
ORDER_KNOBS = {"SPLIT": (0, 1), "SEG": (1024, 2048, 4096)}
KNOB_WHEN = {"CAP": {"SEG": (4096,)}, "SEG": {"SPLIT": 1}}
"""


def _canonical_grid(knobs: list) -> set[str]:
    """Every setting of the grid as the one it stands for (brute force)."""
    names = [k.name for k in knobs]
    return {
        setting_label(canonical(knobs, dict(zip(names, values, strict=True))))
        for values in itertools.product(*(k.choices for k in knobs))
    }


def test_conditions_order_the_knobs_and_leave_unread_ones_at_the_source_value() -> None:
    knobs = read_knobs(_CONDITIONED)
    assert [k.name for k in knobs] == ["WARPS", "SPLIT", "SEG", "CAP"]  # a knob after what it reads
    base = current_setting(knobs)
    assert active(knobs, base) == {"WARPS", "SPLIT"}
    # SEG and CAP are not read while SPLIT is off: any value there is the source's setting.
    assert canonical(knobs, base | {"SEG": 4096, "CAP": 64}) == base
    on = base | {"SPLIT": 1, "SEG": 4096, "CAP": 64}
    assert active(knobs, on) == {"WARPS", "SPLIT", "SEG", "CAP"} and canonical(knobs, on) == on
    assert canonical(knobs, on | {"SEG": 1024}) == on | {"SEG": 1024, "CAP": 16}
    # 2 warps × (split off: 1 + split on: 1024, 2048, 4096 × 2 caps) = 10 settings, not 24.
    assert settings_count(knobs) == len(_canonical_grid(knobs)) == 10


@pytest.mark.parametrize("task", ["gemm", "attention_decode"])
def test_the_count_of_settings_matches_the_grid(task: str) -> None:
    knobs = read_knobs((KERNELS / f"{task}.py").read_text())
    assert any(k.when for k in knobs)
    if task == "attention_decode":  # small enough to enumerate
        assert settings_count(knobs) == len(_canonical_grid(knobs)) < math.prod(len(k.choices) for k in knobs)
    else:
        assert settings_count(knobs) < math.prod(len(k.choices) for k in knobs) // 5


def test_proposals_are_canonical_and_the_search_ends_with_the_reduced_grid() -> None:
    knobs = read_knobs(_CONDITIONED)
    trials: list[tuple[Setting, float]] = [(current_setting(knobs), 1.0)]
    while (setting := propose(knobs, trials, seed=5)) is not None:
        assert setting == canonical(knobs, setting)  # nothing set where the kernel does not read
        trials.append((setting, 1.0 + 0.1 * len(trials)))
    assert len(trials) == 10  # each distinct setting once, then exhausted
    assert {setting_label(s) for s, _ in trials} == _canonical_grid(knobs)


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ('{"NOPE": {"SPLIT": (1,)}}', "'NOPE', which is not a declared knob"),
        ('{"SEG": {"NOPE": (1,)}}', "depends on 'NOPE'"),
        ('{"SEG": {"SEG": (1,)}}', "depends on 'SEG'"),
        ('{"SEG": {"SPLIT": (2,)}}', "outside its choices"),
        ('{"SEG": (1,)}', "must map knob names"),
        ('{"SEG": {"SPLIT": (1,)}, "SPLIT": {"SEG": (2048,)}}', "goes round in a circle"),
    ],
)
def test_a_bad_condition_is_one_line(when: str, says: str) -> None:
    source = _CONDITIONED.replace(
        'KNOB_WHEN = {"CAP": {"SEG": (4096,)}, "SEG": {"SPLIT": 1}}', f"KNOB_WHEN = {when}"
    )
    with pytest.raises(KnobError) as err:
        read_knobs(source)
    assert says in err.value.line() and "\n" not in err.value.line()


def test_a_search_of_named_knobs_holds_the_others_at_the_source_value() -> None:
    """``--knob SEG --knob SPLIT``: the warps and the cap stay as the source has them; the grid is the
    chosen knobs' (split off, or on with three segment lengths), and the search ends there."""
    knobs = restrict(read_knobs(_CONDITIONED), ["SEG", "SPLIT"])
    assert [k.choices for k in knobs if k.name in ("WARPS", "CAP")] == [(4,), (16,)]
    assert settings_count(knobs) == 4
    trials: list[tuple[Setting, float]] = [(current_setting(knobs), 1.0)]
    while (setting := propose(knobs, trials, seed=3)) is not None:
        assert (setting["WARPS"], setting["CAP"]) == (4, 16)
        trials.append((setting, 1.0 + 0.1 * len(trials)))
    assert len(trials) == 4
    with pytest.raises(KnobError) as err:
        restrict(read_knobs(_CONDITIONED), ["SEG", "TILE"])
    assert err.value.line() == "bad knobs: no knob named TILE (declared: WARPS, SPLIT, SEG, CAP)"


def test_the_knob_flag_reaches_the_knob_search_only() -> None:
    agent = make_agent("knobs", agent_args=["--knob=MID_TILES", "--knob=MID_BLOCK_N"])
    assert isinstance(agent, KnobSearchAgent) and agent.only == ["MID_TILES", "MID_BLOCK_N"]
    with pytest.raises(AgentError, match="--knob is for --agent knobs, not 'builtin'"):
        make_agent("builtin", agent_args=["--knob=MID_TILES"])
    with pytest.raises(AgentError, match="--agent-arg is for the CLI presets"):
        make_agent("knobs", agent_args=["--knob=MID_TILES", "--verbose"])
