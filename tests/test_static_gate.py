"""The static stage in the gate: every bundled example, the pipeline order, the CLI and JSON forms."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodice.cli import app
from nodice.gate.pipeline import check
from nodice.gate.static import render_json, render_text, run_static
from nodice.tasks import available, get_task

EXAMPLES = Path(__file__).resolve().parents[1] / "nodice" / "examples"


def _examples() -> list[tuple[str, Path]]:
    out = []
    for folder in sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and p.name in available()):
        out += [(folder.name, f) for f in sorted(folder.glob("*.py")) if not f.name.startswith("_")]
    return out


def _violates(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.startswith("VIOLATES")


@pytest.mark.parametrize(("task", "path"), _examples(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_bundled_example_verdict(task: str, path: Path) -> None:
    violations, _ = run_static(path, get_task(task))
    if path.stem == "seed":
        assert violations == [], render_text(violations, [])
    elif _violates(path):
        assert violations, f"{path} violates batch invariance but static analysis found nothing"
        for f in violations:
            assert f.path and f.guidance and f.line > 0 and f.mechanism and f.protected


VIOLATING = EXAMPLES / "rmsnorm" / "tile_from_batch.py"
SEED = EXAMPLES / "rmsnorm" / "seed.py"


def test_static_rejection_stops_the_pipeline() -> None:
    r = check(VIOLATING, "rmsnorm", device="cpu", seed=0)
    assert r.verdict == "bi_violation" and r.exit_code == 1
    assert [s.name for s in r.stages] == ["static"]
    assert r.reason.startswith("static: ")
    d = r.to_dict()
    f = d["findings"][0]
    assert {"mechanism", "protected", "file", "line", "path", "guidance"} <= f.keys()
    assert f["mechanism"] == "reduction_order" and f["protected"] == "BLOCK_H"


def test_static_only_and_dynamic_only_are_exclusive_ablations() -> None:
    r = check(SEED, "rmsnorm", device="cpu", correctness=False, dynamic=False, seed=0)
    assert r.verdict == "pass" and [s.name for s in r.stages] == ["static"]
    r = check(VIOLATING, "rmsnorm", device="cpu", static=False, correctness=False, dynamic=False, seed=0)
    assert r.verdict == "pass" and r.stages == []


def test_cli_static_only_json_and_text() -> None:
    runner = CliRunner()
    res = runner.invoke(
        app, ["check", str(VIOLATING), "-t", "rmsnorm", "--static-only", "--json", "--device", "cpu"]
    )
    assert res.exit_code == 1, res.output
    d = json.loads(res.stdout)
    assert d["verdict"] == "bi_violation" and list(d["stages"]) == ["static"]
    assert d["findings"][0]["path"][0].startswith("line 31: batch, hidden = x.shape")
    res = runner.invoke(app, ["check", str(VIOLATING), "-t", "rmsnorm", "--static-only", "--device", "cpu"])
    assert res.exit_code == 1 and "fix: derive the tile from the hidden size only" in res.stdout
    res = runner.invoke(app, ["check", str(SEED), "-t", "rmsnorm", "--static-only", "--dynamic-only"])
    assert res.exit_code == 2


def test_cli_bad_contract_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("protect('X', mechanism='nope')\n")
    res = CliRunner().invoke(
        app, ["check", str(SEED), "-t", "rmsnorm", "--static-only", "--device", "cpu", "--contract", str(bad)]
    )
    assert res.exit_code == 2
    assert "bad contract" in res.output and "Traceback" not in res.output


def test_unparsable_candidate_is_left_to_the_loader(tmp_path: Path) -> None:
    p = tmp_path / "broken.py"
    p.write_text("def kernel(x, weight, eps:\n")
    assert run_static(p, get_task("rmsnorm")) == ([], [])
    r = check(p, "rmsnorm", device="cpu", seed=0)
    assert r.verdict == "error" and "syntax error" in (r.error or "")


def test_render_forms() -> None:
    v, u = run_static(VIOLATING, get_task("rmsnorm"))
    text = render_text(v, u)
    assert "[violation]" in text and "line 31: batch, hidden = x.shape  (batch source: x.shape[0])" in text
    assert json.loads(render_json(v, u))["verdict"] == "reject"


EXOTIC = """
import asyncio
import functools
import torch

GLOBAL: dict = {}


class Meta(type):
    pass


class Base(metaclass=Meta):
    __slots__ = ("a",)

    @property
    def size(self):
        return 1

    @staticmethod
    def helper(*args, **kwargs):
        return args, kwargs


async def coro(x):
    async with asyncio.Lock():
        await asyncio.sleep(0)
    return [i async for i in agen(x)]


async def agen(x):
    yield x


def deep(n):
    return deep(n - 1) if n else 0


def kernel(x, weight, eps, *rest, **opts):
    global GLOBAL
    match x.dim():
        case 2:
            pass
        case _:
            raise ValueError("2-D only")
    if (n := x.shape[0]) and n > 0:
        GLOBAL[n] = lambda *a, **k: (a, k)
    first, *others = x.shape
    try:
        del GLOBAL[first]
    except KeyError:
        pass
    finally:
        deep(3)
    part = functools.partial(Base.helper, 1)
    with torch.no_grad():
        y = {**{"a": 1}, **opts}
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight)[..., :] if y else x
"""


def test_unusual_python_does_not_break_the_analyzer(tmp_path: Path) -> None:
    p = tmp_path / "exotic.py"
    p.write_text(EXOTIC)
    violations, _ = run_static(p, get_task("rmsnorm"))
    assert violations == []


def test_pathological_file_runs_out_of_budget_not_forever(tmp_path: Path) -> None:
    loops = "\n".join("    " * (i + 1) + f"for i{i} in range(x.shape[0]):" for i in range(14))
    p = tmp_path / "nested.py"
    p.write_text("def kernel(x, weight, eps):\n" + loops + "\n" + "    " * 15 + "y = x\n    return x\n")
    t0 = time.perf_counter()
    violations, _ = run_static(p, get_task("rmsnorm"))
    assert time.perf_counter() - t0 < 10
    assert violations == []


@pytest.mark.parametrize("mode", ["--no-sandbox", "--static-only"])
@pytest.mark.parametrize("needs_sandbox", [["--bench"], ["--store", "evals.sqlite"]])
def test_benchmark_and_store_refuse_to_run_outside_the_sandbox(mode: str, needs_sandbox: list[str]) -> None:
    res = CliRunner().invoke(
        app, ["check", str(SEED), "-t", "rmsnorm", "--device", "cpu", mode, *needs_sandbox]
    )
    assert res.exit_code == 2
    assert res.output.strip() == (
        "--bench and --store run the candidate in the sandbox: drop --no-sandbox and --static-only"
    )
