"""Module-level numbers read inside ``@triton.jit`` functions: fine under the interpreter, a
compile error on a GPU.

Triton's compiler lets a jitted function read a global only when it is a ``tl.constexpr`` (or a
module, a function, another jitted function); a plain ``BIG = 2**31 - 1`` read inside the kernel
fails with "Cannot access global variable BIG from within @jit'ed function" at the first launch
on a GPU (unless ``TRITON_ALLOW_NON_CONSTEXPR_GLOBALS=1``). ``TRITON_INTERPRET=1`` evaluates the
kernel as Python and accepts it, so a candidate that passes the gate on CPU can crash on its first
GPU launch. This is not a batch-invariance finding; the gate reports it as a note.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class GlobalRead:
    function: str
    name: str
    line: int
    value: str  # the global's literal, as written


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr == "jit"
    return isinstance(target, ast.Name) and target.id == "jit"


def _literal(node: ast.expr) -> bool:
    """A number, bool or string, or arithmetic of them (``2**31 - 1``, ``-0.5``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, str, bool))
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    return False


def _module_literals(tree: ast.Module) -> dict[str, ast.expr]:
    """Names the module binds to a literal at top level, and never to anything else there."""
    found: dict[str, ast.expr] = {}
    other: set[str] = set()
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        for target in targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            values = (
                value.elts
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                else [value] * len(names)
            )
            for name, val in zip(names, values, strict=False):
                if not isinstance(name, ast.Name):
                    continue
                if val is not None and _literal(val) and len(names) == len(values):
                    found[name.id] = val
                else:
                    other.add(name.id)
    return {k: v for k, v in found.items() if k not in other}


def _local_names(fn: ast.FunctionDef) -> set[str]:
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def nonconstexpr_globals(source: str) -> list[GlobalRead]:
    """Every read, inside a ``@triton.jit`` function, of a module-level literal global."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    literals = _module_literals(tree)
    reads: list[GlobalRead] = []
    if not literals:
        return reads
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or not any(_is_jit(d) for d in fn.decorator_list):
            continue
        local = _local_names(fn)
        seen: set[str] = set()
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id in literals
                and node.id not in local
                and node.id not in seen
            ):
                seen.add(node.id)
                reads.append(GlobalRead(fn.name, node.id, node.lineno, ast.unparse(literals[node.id])))
    return sorted(reads, key=lambda r: r.line)


def note(reads: list[GlobalRead]) -> str | None:
    """The gate's one note for them (None when there are none)."""
    if not reads:
        return None
    first = reads[0]
    more = f" (and {len(reads) - 1} more)" if len(reads) > 1 else ""
    return (
        f"line {first.line}: @triton.jit function {first.function} reads the module-level "
        f"{first.name} = {first.value}{more}: the interpreter accepts this, but Triton's compiler "
        f"rejects it on a GPU (only tl.constexpr globals); write {first.name} = "
        f"tl.constexpr({first.value}) or pass it as a tl.constexpr argument"
    )
