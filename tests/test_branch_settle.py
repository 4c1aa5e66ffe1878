"""Batch-dependent choices between algorithms: static analysis locates the branch, the dynamic stage
watches both sides run, and the full gate clears the finding only on that evidence."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

from nodice.gate.branches import BranchWatch, confirmable
from nodice.gate.pipeline import SEARCH_ROUNDS, SETTLE_ROUNDS, check
from nodice.gate.static import run_static
from nodice.tasks import get_task
from tests.conftest import run_cli

# Two sides that compute the same bits through different functions (names the analyzer cannot
# tell apart from two algorithms), chosen by the batch size.
_NORM = """
import torch


def _rows_a(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _rows_b(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _rows_c(x, weight, eps):
    xf = x.float()
    return (xf * (1.0 / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps)) * weight.float()).to(x.dtype)

"""

EQUAL = (
    _NORM
    + """
def kernel(x, weight, eps):
    if x.shape[0] <= 4:
        return _rows_a(x, weight, eps)
    return _rows_b(x, weight, eps)
"""
)

# The same choice, but the small-batch side divides by a square root instead of multiplying by rsqrt.
DIFFERENT = (
    _NORM
    + """
def kernel(x, weight, eps):
    if x.shape[0] <= 4:
        return _rows_c(x, weight, eps)
    return _rows_b(x, weight, eps)
"""
)

# The other side only runs past a batch size no validation reaches.
UNREACHED = (
    _NORM
    + """
def kernel(x, weight, eps):
    if x.shape[0] > 1_000_000:
        return _rows_a(x, weight, eps)
    return _rows_b(x, weight, eps)
"""
)

# An exception raised for some batch sizes chooses the handler's computation.
HANDLER = (
    _NORM
    + """
def _packed(x, weight, eps):
    if x.shape[0] % 4:
        raise ValueError("rows not a multiple of 4")
    return _rows_a(x, weight, eps)


def kernel(x, weight, eps):
    try:
        return _packed(x, weight, eps)
    except ValueError:
        return _rows_b(x, weight, eps)
"""
)

SHAPES = """
def pick(B):
    if B <= 4:
        return "small"
    return "big"


def one_line(B):
    if B: return 1
    return 2


def chain(B):
    if B == 1:
        r = 1
    elif B == 2:
        r = 2
    else:
        r = 3
    return r


def in_loop(bs):
    out = []
    for B in bs:
        try:
            if B % 2:
                raise ValueError
            r = 0
        except ValueError:
            r = 1
        out.append(r)
    return out
"""


def _write(tmp_path: Path, source: str, name: str = "cand.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source))
    return p


def test_static_finding_locates_both_sides(tmp_path: Path) -> None:
    for source, kind, sides in ((EQUAL, "if", ("test", "taken")), (HANDLER, "try", ("tried", "handler"))):
        p = _write(tmp_path, source)
        violations, _ = run_static(p, get_task("rmsnorm"))
        assert [f.rule for f in violations] == ["algorithm_selection_by_batch"]
        b = violations[0].branch
        assert b is not None and b["kind"] == kind and b["function"] == "kernel"
        assert all(len(b[s]) == 4 for s in sides)
        assert confirmable(violations[0])


def _watch(tmp_path: Path) -> tuple[dict[str, BranchWatch], object]:
    """Watches for every ``if`` at the top of a function and every ``try`` of SHAPES."""
    import ast

    from nodice.gate.result import Finding
    from nodice.gate.static.branches import if_branch, try_branch

    p = _write(tmp_path, SHAPES, "shapes.py")
    tree = ast.parse(p.read_text())

    class Mod:
        pass

    mod = Mod()
    mod.tree, mod.display = tree, str(p)  # type: ignore[attr-defined]
    findings: dict[str, Finding] = {}
    for fn in tree.body:
        assert isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn):
            branch = None
            if isinstance(node, ast.If) and node in fn.body:
                branch = if_branch(mod, node)  # type: ignore[arg-type]
            elif isinstance(node, ast.Try):
                branch = try_branch(mod, node, node.handlers[0])  # type: ignore[arg-type]
            if branch is not None:
                findings[fn.name] = Finding(
                    "algorithm_selection_by_batch", "algorithm_selection", "ALGORITHM", str(p), node.lineno,
                    fn.name, [], branch=branch,
                )  # fmt: skip
    spec = importlib.util.spec_from_file_location("shapes_under_watch", p)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: BranchWatch([f], p) for name, f in findings.items()}, module


def test_watch_sees_which_side_ran(tmp_path: Path) -> None:
    cases = {
        "pick": ([1], {"taken"}, [9], {"other"}),
        "one_line": ([1], {"taken"}, [0], {"other"}),
        "chain": ([1], {"taken"}, [3], {"other"}),
        "in_loop": ([[1]], {"handler"}, [[2]], {"tried"}),
    }
    for name, (arg_a, seen_a, arg_b, seen_b) in cases.items():
        for args, seen in ((arg_a, seen_a), (arg_b, seen_b)):
            watches, module = _watch(tmp_path)
            w = watches[name]
            fn = w.wrap(getattr(module, name))
            fn(*args)
            assert w.watches[0].seen == seen, (name, args)
        watches, module = _watch(tmp_path)
        w = watches[name]
        fn = w.wrap(getattr(module, name))
        fn(*arg_a)
        fn(*arg_b)
        assert not w.uncovered(), name
    # Tracing stops at a call's first decision (the kernel's work after it runs untraced), and the
    # tracer that was there before is back after the call.
    watches, module = _watch(tmp_path)
    w = watches["in_loop"]
    import sys

    before = sys.gettrace()
    w.wrap(module.in_loop)([1, 2])  # type: ignore[attr-defined]
    assert w.watches[0].seen == {"handler"}
    assert sys.gettrace() is before


def test_equal_sides_are_cleared_by_the_full_gate(tmp_path: Path) -> None:
    p = _write(tmp_path, EQUAL)
    static = check(p, "rmsnorm", device="cpu", seed=1, correctness=False, dynamic=False)
    assert static.verdict == "bi_violation"  # static analysis alone still rejects the choice
    r = check(p, "rmsnorm", device="cpu", seed=1)
    assert r.verdict == "pass", r.reason
    assert r.stage("static").verdict == "unresolved"  # type: ignore[union-attr]
    assert r.stage("branches").verdict == "pass"  # type: ignore[union-attr]
    assert [f.severity for f in r.findings] == ["cleared"]
    assert any("cleared: both sides" in n for n in r.notes)
    # Cleared on more evidence than a plain pass: the settling rounds ran too.
    assert r.stage("dynamic").stats["rounds"] == 1 + SETTLE_ROUNDS  # type: ignore[union-attr]


def test_different_sides_are_rejected_with_the_mismatch(tmp_path: Path) -> None:
    p = _write(tmp_path, DIFFERENT)
    r = check(p, "rmsnorm", device="cpu", seed=1)
    assert r.verdict == "bi_violation"
    assert r.mismatch is not None and r.reason.startswith("dynamic:")
    assert [f.rule for f in r.findings] == ["algorithm_selection_by_batch"]
    assert r.findings[0].severity == "violation"


def test_a_side_that_never_ran_keeps_the_finding(tmp_path: Path) -> None:
    p = _write(tmp_path, UNREACHED)
    r = check(p, "rmsnorm", device="cpu", seed=1)
    assert r.verdict == "bi_violation"
    assert "never ran its taken side" in r.reason
    branches = r.stage("branches")
    assert branches is not None and branches.verdict == "reject"
    dyn = r.stage("dynamic")
    # The settling rounds, then the rounds that look for a side not yet run.
    assert dyn is not None and dyn.stats["rounds"] == 1 + SETTLE_ROUNDS + SEARCH_ROUNDS


def test_handler_side_is_watched_through_the_cli(tmp_path: Path) -> None:
    """The sandboxed CLI path, anti-cheat guards included: the harness's own tracer is no tampering."""
    p = _write(tmp_path, HANDLER)
    proc = run_cli("check", str(p), "--task", "rmsnorm", "--device", "cpu", "--seed", "2", "--json")
    out = json.loads(proc.stdout)
    assert out["verdict"] == "pass", out["reason"]
    assert out["stages"]["branches"]["verdict"] == "pass"
    assert out["findings"][0]["severity"] == "cleared"
    assert out["findings"][0]["branch"]["kind"] == "try"
    # In the text form a cleared finding is shown as such, without a repair to make.
    text = run_cli("check", str(p), "--task", "rmsnorm", "--device", "cpu", "--seed", "2")
    assert text.returncode == 0 and "[cleared]" in text.stdout and "fix:" not in text.stdout
