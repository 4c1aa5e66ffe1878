"""Batch sizes a candidate compares its own batch against, for the dynamic stage to straddle.

A candidate that switches precision, algorithm or tile at ``if x.shape[0] >= 32`` is only seen
switching in a batch of 32 or more. The task's contexts cover the usual heuristics' sizes and the
problem's own batch, which can stay below such a literal. The threshold is in the source: every
integer literal compared with a batch count (``x.shape[0]``, ``x.size(0)``, ``len(x)``, or a name
bound to one of them) gives the dynamic stage the batch sizes just below, at and above it. Nothing
is concluded from the comparison itself: the extra contexts only give the switch a chance to
happen where it is compared bit for bit.
"""

from __future__ import annotations

import ast
from pathlib import Path

# Literals outside this range are not batch sizes worth a context (flags, dims, byte counts).
_LOWEST, _HIGHEST = 2, 65536
# At most this many thresholds per candidate (each adds up to three batch sizes).
MAX_THRESHOLDS = 6


def batch_thresholds(path: Path) -> list[int]:
    """The integer literals ``path`` compares with a batch count, smallest first (unparsable: none)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: set[str] = set()
    for _ in range(3):  # names bound from names bound from a batch count
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = node.value
                if bound is None:
                    continue
                for target in targets:
                    if isinstance(target, ast.Name) and _batch_count(bound, names):
                        names.add(target.id)
                    elif isinstance(target, ast.Tuple | ast.List) and target.elts and _shape(bound):
                        first = target.elts[0]
                        if isinstance(first, ast.Name):
                            names.add(first.id)
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_batch_count(s, names) for s in sides):
                for side in sides:
                    literal = _int_literal(side)
                    if literal is not None and _LOWEST <= literal <= _HIGHEST:
                        found.add(literal)
    return sorted(found)[:MAX_THRESHOLDS]


def straddling(thresholds: list[int]) -> list[int]:
    """The batch sizes just below, at and just above each threshold."""
    return sorted({b for t in thresholds for b in (t - 1, t, t + 1) if b >= _LOWEST})


def _shape(e: ast.expr) -> bool:
    """``x.shape`` or ``x.size()``."""
    if isinstance(e, ast.Attribute) and e.attr == "shape":
        return True
    return (
        isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "size" and not e.args
    )


def _batch_count(e: ast.expr, names: set[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id in names
    if isinstance(e, ast.Subscript) and _shape(e.value):
        return _int_literal(e.slice) == 0
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "size":
        return len(e.args) == 1 and _int_literal(e.args[0]) == 0
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len":
        return len(e.args) == 1
    return False


def _int_literal(e: ast.expr) -> int | None:
    """An integer written as a literal or an arithmetic of literals (``2 ** 5``, ``1 << 10``)."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    if isinstance(e, ast.BinOp):
        left, right = _int_literal(e.left), _int_literal(e.right)
        return None if left is None or right is None else _small(e.op, left, right)
    return None


def _small(op: ast.operator, a: int, b: int) -> int | None:
    if isinstance(op, ast.Pow | ast.LShift):
        if not 0 <= b <= 32:
            return None
        return a**b if isinstance(op, ast.Pow) else a << b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    return None
