"""The layout is the architecture: floors that point one way, and no new circles between files.

Every ``import`` in the package is read from the source (type-checking-only imports aside, as the
style guide allows); a module may import its own floor or a lower one, never a higher one.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nodice"

# Floor by top-level room, lowest first: tasks → gate → measuring → evaluation → evolution → report,
# with the CLI on top. Rooms on one floor do not import each other's floor above.
FLOORS: dict[str, int] = {
    "errors": 0,
    "catalog": 0,  # the task names, without PyTorch
    "loader": 0,  # how a candidate file is read and imported: below the tasks that import reference files
    "references": 0,
    "tasks": 1,
    "gate": 2,
    "contracts": 2,  # the gate's contract files
    "kernels": 3,  # nodice's verified kernels and batch-invariant mode, built on the gate
    "testing": 3,
    "measuring": 3,
    "evaluation": 4,
    "audit": 5,
    "bench": 5,  # nodice's own benchmarks, above the evaluation service they run on
    "evolution": 5,
    "knowledge": 5,  # the evolution's starter knowledge base (Markdown)
    "report": 6,
    "integrations": 7,
    "cli": 8,
    "__main__": 9,
}

# Circles between files that stay, each one design: the static interpreter's mixins recurse into
# each other through the analysis (a call is interpreted by the same interpreter), and a package's
# __init__ re-exports modules that import it back lazily.
ALLOWED_CIRCLES = [
    {
        "nodice.gate.static.calls",
        "nodice.gate.static.dataflow",
        "nodice.gate.static.expressions",
        "nodice.gate.static.program",
        "nodice.gate.static.torch_calls",
        "nodice.gate.static.triton_launch",
    },
    {"nodice.tasks", "nodice.tasks.definition"},
    {"nodice.kernels", "nodice.kernels.mode"},
    {
        "nodice.measuring.baselines",
        "nodice.measuring.baselines.attention_prefill",
        "nodice.measuring.baselines.attention_varlen",
    },
    {
        "nodice.evolution.agents",
        "nodice.evolution.agents.buckets",
        "nodice.evolution.agents.builtin",
        "nodice.evolution.agents.rewrites",
    },
]


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for p in PACKAGE.rglob("*.py") if "examples" not in p.relative_to(PACKAGE).parts}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _imports() -> dict[str, set[str]]:
    """Module → the package modules it imports at run time (at the top or inside a function)."""
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        tree = _tree(path)
        skip = _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            edges[name].update(t for t in targets if t in modules and t not in (name, "nodice"))
    return edges


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_room_has_a_floor() -> None:
    rooms = {_room(m) for m in _modules() if m != "nodice"}
    assert rooms <= set(FLOORS), f"rooms without a floor: {sorted(rooms - set(FLOORS))}"


def test_no_import_runs_up_a_floor() -> None:
    upward = [
        f"{m} (floor {FLOORS[_room(m)]}) imports {t} (floor {FLOORS[_room(t)]})"
        for m, targets in _imports().items()
        if m != "nodice"
        for t in sorted(targets)
        if FLOORS[_room(t)] > FLOORS[_room(m)]
    ]
    assert upward == []


def _circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize(
    "pair",
    [
        ("nodice.evaluation.executor", "nodice.evaluation.ray_executor"),
        ("nodice.evaluation.executor", "nodice.evaluation.ray_slots"),
        ("nodice.evolution.engine", "nodice.evolution.islands"),
        ("nodice.gate.static.triton_decorators", "nodice.gate.static.triton_kernels"),
    ],
)
def test_the_cut_circles_stay_cut(pair: tuple[str, str]) -> None:
    assert not any(set(pair) <= c for c in _circles(_imports()))


def test_no_new_circle_between_files() -> None:
    new = [sorted(c) for c in _circles(_imports()) if c not in ALLOWED_CIRCLES]
    assert new == []


def test_the_commands_live_in_one_package_with_one_way_to_fail() -> None:
    sources = {str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8") for p in _modules().values()}
    defining = [name for name, text in sources.items() if "typer.Exit(" in text]
    assert all(d.startswith("cli/") for d in defining), defining
    failing = [
        str(p.relative_to(PACKAGE))
        for p in _modules().values()
        if any(isinstance(n, ast.FunctionDef) and n.name in ("_fail", "fail") for n in _tree(p).body)
    ]
    assert failing == ["cli/common.py"]
