"""Module-level pins: literal constants a module never rebinds, and the conditions they decide.

Kernels keep switches and tile sizes as module constants (``FAST_PATH = 0``, ``USE_TMA = 1``) and
test them next to the batch: ``if FAST_PATH and n_rows <= 16: <another kernel>``. With the pin off,
that branch never runs, whatever the batch; reading it as a batch-dependent choice rejects a kernel
for code it cannot execute. A condition whose truth the pins decide is therefore decided here:
``and`` stops at its first operand that is false, ``or`` at its first that is true (as Python
evaluates them), ``not`` flips a decided truth, and an ``if`` or a conditional expression whose
test is decided runs only the side that is taken.

A name is a pin only while nothing can rebind it: bound once at the module's top level, to a
literal (or a tuple of literals unpacked into names), never declared ``global`` in a function of
the module, no ``globals()`` or ``setattr`` in the module, and no attribute of that name stored
to in any Python file of the candidate's folder (``kernels.FAST_PATH = 1`` from a helper). Values
read from the environment, computed, or written anywhere else stay ordinary values.
"""

from __future__ import annotations

import ast
import operator
import os
from pathlib import Path
from typing import Any

from nodice.gate.static.values import NO_CONST


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | str | type(None)):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        return -node.operand.value
    return NO_CONST


def _module_scope(tree: ast.Module) -> list[ast.AST]:
    """Every node that runs in the module's own scope (not inside a function, class or lambda)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


_DYNAMIC_SCOPE = ("globals", "setattr", "vars", "exec", "eval", "__import__")


def module_pins(tree: ast.Module) -> dict[str, Any]:
    """The module's pins and their values (before the folder-wide attribute check)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC_SCOPE:
            return {}
    declared = {
        n for node in ast.walk(tree) if isinstance(node, ast.Global | ast.Nonlocal) for n in node.names
    }
    literal: dict[str, Any] = {}
    for s in tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            if isinstance(t, ast.Name):
                literal[t.id] = _literal(v)
            elif isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
                for te, ve in zip(t.elts, v.elts, strict=True):
                    if isinstance(te, ast.Name):
                        literal[te.id] = _literal(ve)
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            literal[s.target.id] = _literal(s.value)
    bindings: dict[str, int] = {}
    for node in _module_scope(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bindings[node.id] = bindings.get(node.id, 0) + 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bindings[node.name] = bindings.get(node.name, 0) + 1
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                bound = (a.asname or a.name).split(".")[0]
                bindings[bound] = bindings.get(bound, 0) + 1
    return {
        name: value
        for name, value in literal.items()
        if value is not NO_CONST and bindings.get(name) == 1 and name not in declared
    }


def stored_attributes(folder: Path) -> frozenset[str]:
    """Attribute names stored to (``x.NAME = …``, ``del x.NAME``) in the folder's Python files, and
    every name if one of them calls ``setattr`` (it could set any)."""
    out: set[str] = set()
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return frozenset()
    for name in names:
        if not name.endswith(".py"):
            continue
        try:
            tree = ast.parse((folder / name).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
                out.add(node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                out.add("*")
    return frozenset(out)


_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _pinned(node: ast.expr, pins: dict[str, Any], local: frozenset[str]) -> Any:
    """A literal's or a pin's value; ``NO_CONST`` for anything else."""
    if isinstance(node, ast.Name):
        return pins[node.id] if node.id in pins and node.id not in local else NO_CONST
    return _literal(node)


def truth(node: ast.expr, pins: dict[str, Any], local: frozenset[str] = frozenset()) -> bool | None:
    """Whether ``node`` is true, where literals and pins decide it; None where they do not.

    ``local`` are names the function binds itself (a local shadows a pin of the same name)."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.Name):
        if node.id in pins and node.id not in local:
            return bool(pins[node.id])
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = truth(node.operand, pins, local)
        return None if inner is None else not inner
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        # ``TAPS == 0``, ``0 < SPLIT_K <= 4``: pins and literals only, compared as Python would.
        values = [_pinned(v, pins, local) for v in [node.left, *node.comparators]]
        if any(v is NO_CONST for v in values):
            return None
        try:
            return all(
                _COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:], strict=False)
            )
        except TypeError:
            return None
    if isinstance(node, ast.BoolOp):
        stop = isinstance(node.op, ast.Or)  # the truth at which evaluation stops
        decided = [truth(v, pins, local) for v in node.values]
        if stop in decided:
            return stop
        if all(d is not None for d in decided):
            return not stop
    return None


def short_circuit(node: ast.BoolOp, pins: dict[str, Any], local: frozenset[str] = frozenset()) -> int:
    """How many of the operands of ``node`` Python evaluates at most: up to and including the first
    whose truth the pins decide and that stops the evaluation."""
    stop = isinstance(node.op, ast.Or)
    for i, v in enumerate(node.values):
        if truth(v, pins, local) is stop:
            return i + 1
    return len(node.values)
