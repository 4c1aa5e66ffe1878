"""Batch sizes a candidate compares its own batch against, for the dynamic stage to straddle.

A candidate that switches precision, algorithm or tile at ``if x.shape[0] >= 32`` is only seen
switching in a batch of 32 or more. The task's contexts cover the usual heuristics' sizes and the
problem's own batch, which can stay below such a literal. The threshold is in the source: every
integer literal compared with a batch count (``x.shape[0]``, ``x.size(0)``, ``len(x)``, or a name
bound to one of them) gives the dynamic stage the batch sizes just below, at and above it. A
literal compared with an element count (``x.numel()``, ``x.nelement()``, ``torch.numel(x)``) is a
batch size too, once divided by a sample's elements (:meth:`Thresholds.batch_sizes`); a module-level
integer constant (``LARGE = 1 << 20``) counts as the literal it holds. Nothing is concluded from the
comparison itself: the extra contexts only give the switch a chance to happen where it is compared
bit for bit.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

# Literals outside these ranges are not sizes worth a context (flags, dims, byte counts).
_LOWEST, _HIGHEST = 2, 65536
_MOST_ELEMENTS = 1 << 40
# At most this many thresholds per candidate (each adds up to three batch sizes).
MAX_THRESHOLDS = 6


@dataclass
class Thresholds:
    """The literals a candidate compares with its batch count and with an element count."""

    batch: list[int] = field(default_factory=list)
    elements: list[int] = field(default_factory=list)

    def batch_sizes(self, sample_elements: list[int]) -> list[int]:
        """The batch thresholds, and the batch at which each element count reaches each element
        threshold, for every input's elements per sample (``Task.sample_elements``)."""
        sizes = set(self.batch)
        for t in self.elements:
            sizes.update(b for b in (-(-t // n) for n in sample_elements if n > 0) if b >= _LOWEST)
        return sorted(s for s in sizes if s <= _HIGHEST)[: 2 * MAX_THRESHOLDS]


def scan(path: Path) -> Thresholds:
    """The integer literals ``path`` compares with a batch count or an element count, smallest first
    (unparsable: none)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return Thresholds()
    consts = _module_constants(tree)
    batch: set[str] = set()
    elements: set[str] = set()
    for _ in range(3):  # names bound from names bound from a count
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = node.value
                if bound is None:
                    continue
                for target in targets:
                    if isinstance(target, ast.Name) and _batch_count(bound, batch):
                        batch.add(target.id)
                    elif isinstance(target, ast.Name) and _element_count(bound, elements):
                        elements.add(target.id)
                    elif isinstance(target, ast.Tuple | ast.List) and target.elts and _shape(bound):
                        first = target.elts[0]
                        if isinstance(first, ast.Name):
                            batch.add(first.id)
    found = Thresholds()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for counted, into, highest in (
            (lambda e: _batch_count(e, batch), found.batch, _HIGHEST),
            (lambda e: _element_count(e, elements), found.elements, _MOST_ELEMENTS),
        ):
            if any(counted(s) for s in sides):
                for side in sides:
                    literal = _int_literal(side, consts)
                    if literal is not None and _LOWEST <= literal <= highest and literal not in into:
                        into.append(literal)
    found.batch = sorted(found.batch)[:MAX_THRESHOLDS]
    found.elements = sorted(found.elements)[:MAX_THRESHOLDS]
    return found


def _module_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound once, to an integer literal (``THRESHOLD = 1 << 20``)."""
    bound: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            bound.setdefault(node.target.id, []).append(node.value)
    out: dict[str, int] = {}
    for name, values in bound.items():
        value = _int_literal(values[0]) if len(values) == 1 else None
        if value is not None:
            out[name] = value
    return out


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


def _element_count(e: ast.expr, names: set[str]) -> bool:
    """``x.numel()``, ``x.nelement()``, ``torch.numel(x)``, or a name bound to one of them."""
    if isinstance(e, ast.Name):
        return e.id in names
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)):
        return False
    if e.func.attr in ("numel", "nelement") and not e.args:
        return True
    return e.func.attr == "numel" and len(e.args) == 1 and isinstance(e.func.value, ast.Name)


def _int_literal(e: ast.expr, consts: dict[str, int] | None = None) -> int | None:
    """An integer written as a literal or an arithmetic of literals (``2 ** 5``, ``1 << 10``), or a
    name of ``consts``."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    if isinstance(e, ast.Name) and consts:
        return consts.get(e.id)
    if isinstance(e, ast.BinOp):
        left, right = _int_literal(e.left, consts), _int_literal(e.right, consts)
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
