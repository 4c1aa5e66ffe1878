"""Where a batch-dependent choice between algorithms sits, so that the dynamic stage can watch it.

A finding of ``algorithm_selection_by_batch`` says that the batch decides which of two
computations runs, not that the two give different bits: a dense and a sparse MoE path, or a
one-pass and a split decode with a fixed split size, can agree bit for bit. The full gate hands
such a finding to dynamic validation with the branch's location (:mod:`nodice.gate.branches`):
it stands unless both sides ran there and every tracked sample matched. This module only
describes the branch: the function it is in (as the interpreter will name its code object) and
the source spans of its condition and sides.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodice.gate.static.program import KernelRef, ModuleInfo

# Trace steps of values that depend on the batch only through which side of a branch ran: the
# branch itself is judged as an algorithm choice (choices.py), not the values.
ASSIGNED_UNDER_BRANCH = "assigned under the batch-dependent branch"
RETURNED_UNDER_BRANCH = "returned under the batch-dependent branch"

Span = list[int]  # [line, column, end line, end column], as ``co_positions`` counts them

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def span(nodes: Sequence[ast.stmt] | Sequence[ast.expr]) -> Span:
    first, last = nodes[0], nodes[-1]
    return [first.lineno, first.col_offset, last.end_lineno or last.lineno, last.end_col_offset or 0]


def _enclosing(tree: ast.Module, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body holds ``node`` (None at module level or in a lambda)."""
    best: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    todo: list[tuple[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None]] = [(tree, None)]
    while todo:
        cur, fn = todo.pop()
        if cur is node:
            best = fn
            break
        inner = cur if isinstance(cur, _FUNCS) else fn
        if isinstance(cur, ast.Lambda):
            inner = None  # a lambda's code object has no name to find it by
        todo.extend((child, inner) for child in ast.iter_child_nodes(cur))
    return best


def _first_line(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's code object's first line: its first decorator's, when it has decorators."""
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)])


def _where(mod: ModuleInfo, node: ast.AST) -> dict[str, Any] | None:
    fn = _enclosing(mod.tree, node)
    if fn is None:
        return None
    return {
        "file": mod.display,
        "function": fn.name,
        "first_line": _first_line(fn),
        "line": getattr(node, "lineno", 0),
    }


def _if_like(
    mod: ModuleInfo,
    node: ast.If | ast.IfExp,
    statement: Span,
    test: ast.expr,
    body: list[Any],
    orelse: list[Any],
) -> dict[str, Any] | None:
    where = _where(mod, node)
    if where is None or not body:
        return None
    return where | {
        "kind": "if",
        "test": span([test]),
        "statement": statement,
        "taken": span(body),
        "orelse": span(orelse) if orelse else None,
    }


def if_branch(mod: ModuleInfo, s: ast.If) -> dict[str, Any] | None:
    """An ``if``: the side its body is (``taken``) and everything else that can follow its test."""
    return _if_like(mod, s, span([s]), s.test, s.body, s.orelse)


def ifexp_branch(mod: ModuleInfo, e: ast.IfExp) -> dict[str, Any] | None:
    """A conditional expression, watched as an ``if``: its body is the ``taken`` side."""
    return _if_like(mod, e, span([e]), e.test, [e.body], [e.orelse])


def try_branch(mod: ModuleInfo, s: ast.Try, handler: ast.ExceptHandler) -> dict[str, Any] | None:
    """A ``try`` whose body raises for some batches: the tried side and the handler's side."""
    where = _where(mod, s)
    if where is None or not s.body or not handler.body:
        return None
    return where | {
        "kind": "try",
        "statement": span([s]),
        "tried": span(s.body),
        "handler": span(handler.body),
    }


def launch_branch(kref: KernelRef, param: str, launch: ast.Call) -> dict[str, Any]:
    """A kernel parameter the batch chooses: the dynamic stage records the values it is launched with
    (the kernel as the interpreter names its function, and the parameter)."""
    return {
        "kind": "launch",
        "file": kref.module.display,
        "function": kref.node.name,
        "first_line": _first_line(kref.node),
        "line": launch.lineno,
        "param": param,
    }
