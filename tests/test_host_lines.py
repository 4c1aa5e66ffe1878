"""The benchmark's record of the host lines a kernel runs, and the built-in agent's use of it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import nodice.kernels.attention_prefill as attention_prefill
from nodice.evaluation.evaluate import Evaluator
from nodice.evaluation.guards.harness_tampering import HarnessSnapshot
from nodice.evolution.agents.mutations import (
    find_sites,
    lines_run_of,
    live_sites,
    neighbours,
    param_mutations,
)
from nodice.gate.host_lines import HostLines

# An RMSNorm with two paths: the one for float64 never runs in the gate or the benchmark.
TWO_PATHS = """\
import torch

ROWS_PER_STEP = 64  # read by the path that runs
WIDE_ROWS_PER_STEP = 128  # read by the float64 path only


def _rms(x, weight, eps, rows):
    out = []
    for part in torch.split(x, rows):
        xf = part.float()
        scale = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        out.append((xf * scale * weight.float()).to(x.dtype))
    return torch.cat(out) if out else torch.empty_like(x)


def kernel(x, weight, eps):
    if x.dtype == torch.float64:
        BLOCK_ROWS = 16
        return _rms(x, weight, eps, min(BLOCK_ROWS, WIDE_ROWS_PER_STEP))
    return _rms(x, weight, eps, ROWS_PER_STEP)
"""


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_the_benchmark_records_the_lines_each_workload_runs_and_the_agent_steps_only_those(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kernel.py"
    path.write_text(TWO_PATHS)
    with Evaluator(device="cpu", isolation="persistent") as ev:
        plain = ev.evaluate(path, "rmsnorm", seed=3)
        recorded = ev.evaluate(path, "rmsnorm", seed=3, bench_options={"host_lines": True})
    assert recorded.verdict == "pass", recorded.check.reason
    assert plain.scores and all(s.lines_run is None for s in plain.scores)  # only when asked
    ran = lines_run_of([s.to_dict() for s in recorded.scores])
    assert ran is not None
    assert _line_of(TWO_PATHS, "return _rms(x, weight, eps, ROWS_PER_STEP)") in ran
    assert _line_of(TWO_PATHS, "scale = torch.rsqrt") in ran
    assert _line_of(TWO_PATHS, "BLOCK_ROWS = 16") not in ran
    names = {m.site.name for m in param_mutations(TWO_PATHS, ran)}
    assert names == {"ROWS_PER_STEP"}
    # Without a record every parameter is stepped, as before.
    everything = {m.site.name for m in param_mutations(TWO_PATHS)}
    assert everything == {"ROWS_PER_STEP", "WIDE_ROWS_PER_STEP", "BLOCK_ROWS"}


def test_device_functions_and_other_files_are_not_recorded(tmp_path: Path) -> None:
    source = (
        "import json\n"
        "def jit(fn):\n"
        "    return fn\n"
        "@jit\n"
        "def _device(x):\n"
        "    y = x + 1\n"
        "    return y\n"
        "def kernel(x):\n"
        "    y = _device(x)\n"
        "    return json.dumps(y)\n"
    )
    path = tmp_path / "mod.py"
    path.write_text(source)
    namespace: dict[str, object] = {}
    exec(compile(source, str(path), "exec"), namespace)
    lines = HostLines(path)
    with lines.tracing():
        namespace["kernel"](1)  # type: ignore[operator]
    assert lines.lines == {9, 10}
    assert sys.gettrace() is None or sys.gettrace() is not lines._trace


def test_the_guards_count_the_host_line_tracer_as_no_tracer(tmp_path: Path) -> None:
    before = HarnessSnapshot.take(hot=True)
    with HostLines(tmp_path / "absent.py").tracing():
        inside = HarnessSnapshot.take(hot=True)
    assert before.changes(inside) == []

    def foreign(frame: object, event: str, arg: object) -> None:
        return None

    previous = sys.gettrace()
    sys.settrace(foreign)
    try:
        tampered = HarnessSnapshot.take(hot=True)
    finally:
        sys.settrace(previous)
    assert any("gettrace" in c for c in before.changes(tampered))


def _function_lines(source: str, *names: str) -> set[int]:
    tree = ast.parse(source)
    out: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def test_on_the_bundled_attention_only_the_hopper_paths_parameters_are_live() -> None:
    source = Path(attention_prefill.__file__).read_text()
    sites = find_sites(source)
    # The lines a bf16 Hopper call runs: the entry point, the path test and the Hopper launcher.
    entry = {_line_of(source, "    if _hopper_path(q):"), _line_of(source, "def kernel(")}
    hopper = _function_lines(source, "_hopper_path", "_hopper_forward", "_aligned") | entry
    hopper.add(_line_of(source, "        return _hopper_forward(q, k, v, causal, sm_scale)"))
    live = {s.name for s in live_sites(source, sites, hopper)}
    tiles = {s.name for s in sites if s.module_name == "_TILES"}
    assert tiles and tiles <= live  # the Hopper launcher reads the table
    assert "BLOCK_M" in live  # read by the launcher and by device code
    portable = {s.name for s in sites if s.line in _function_lines(source, "_portable_forward")}
    assert portable and not portable & live
    assert "ROWS_PER_CONSUMER" in live  # read by the Gluon kernel the Hopper launcher launches
    # The portable path's own call: the reverse.
    fallback = _function_lines(source, "_hopper_path", "_portable_forward") | entry
    fallback.add(_line_of(source, "    return _portable_forward(q, k, v, causal, sm_scale)"))
    live_cpu = {s.name for s in live_sites(source, sites, fallback)}
    assert portable <= live_cpu
    assert not tiles & live_cpu  # the path test (`head_dim in _TILES`) reads the keys only
    # The Gluon kernel is not launched on this path: its constants are left alone.
    assert not {"ROWS_PER_CONSUMER", "BLOCK_M"} & live_cpu


def test_table_entries_and_constexpr_constants_are_parameters() -> None:
    source = (
        "from triton.experimental.gluon import language as gl\n"
        "BLOCK_M = gl.constexpr(128)\n"
        "_TILES = {128: (128, 2), 64: (64, 12)}\n"
        "def kernel(q):\n"
        "    block_n, stages = _TILES[q.shape[-1]]\n"
        "    return BLOCK_M, block_n, stages\n"
    )
    by_name = {s.name: s for s in find_sites(source)}
    assert by_name["BLOCK_M"].value == 128
    assert neighbours(by_name["_TILES[128][1]"]) == [1, 3]  # a small count steps by one
    assert neighbours(by_name["_TILES[64][1]"]) == [24, 6]  # a larger one doubles or halves
    stepped = next(m for m in param_mutations(source) if m.key == "param:_TILES[128][0]=256")
    assert "_TILES = {128: (256, 2), 64: (64, 12)}" in stepped.source
    halved = next(m for m in param_mutations(source) if m.key == "param:BLOCK_M=64")
    assert "BLOCK_M = gl.constexpr(64)" in halved.source


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        (None, None),
        ([], None),
        ([{"workload": "a", "lines_run": [3, 4]}, {"workload": "b", "lines_run": [4, 9]}], {3, 4, 9}),
        ([{"workload": "a", "lines_run": [3]}, {"workload": "b"}], None),  # one workload without a record
    ],
)
def test_lines_run_of_a_score_vector(
    scores: list[dict[str, object]] | None, expected: set[int] | None
) -> None:
    assert lines_run_of(scores) == expected


def test_a_helper_behind_a_cache_stays_live_when_the_traced_call_hit_the_cache() -> None:
    source = (
        "import functools\n"
        "@functools.cache\n"
        "def _plan(n):\n"
        "    BLOCK = 128\n"
        "    return BLOCK\n"
        "def _unused(n):\n"
        "    SPLIT = 4\n"
        "    return SPLIT\n"
        "def kernel(x):\n"
        "    block = _plan(x.shape[-1])\n"
        "    return block\n"
    )
    # The traced call found the plan cached: only the entry point's lines ran.
    live = {s.name for s in live_sites(source, find_sites(source), {10, 11})}
    assert live == {"BLOCK"}
