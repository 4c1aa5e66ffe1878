"""Fixed tiles of the batch: ``x[s:s + C]``, and the same tile padded to C rows.

A loop over the batch in tiles of C rows (``for s in range(0, B, C): t = x[s:s + C]``) gives C rows
but for the last tile, which has what is left of the batch. A library kernel called on that tile
(``F.linear(t, W)``) chooses its algorithm from a row count the batch decided. Padded to C rows
(``torch.cat([t, t.new_zeros(C - n, K)])`` or ``F.pad(t, (0, 0, 0, C - n))``, under
``if n < C:`` or unconditionally), every call has one shape whatever the batch, and each sample's
row goes through the same kernel. The analysis follows that arithmetic with symbolic extents
(``V.extent``), one tile per subscript node:

- ``("window", C, key)``: a tensor whose batch axis is such a tile (at most C rows);
- ``("rows", C, key)``: its row count (``t.shape[0]``, ``t.size(0)``, ``len(t)``);
- ``("short", C, key)``: C minus its row count, what a pad to C rows adds (a value or the rows
  of a tensor allocated with that many rows);
- ``("tile", C, key, batch)``: the tile padded to C rows (``batch``: the window's batch trace,
  for the rows taken back, ``out[:n]``).

A branch on the tile being short (``if n < C:``) chooses only whether to pad when its short side
pads and otherwise does what the full side does (the same calls, values of the same dtypes): both
sides then hold the same C-row tile, and the branch is no batch-dependent choice. On the side where
the tile is full, the window is the tile.

The other way to the same tiles pads the whole batch first: ``Bp = (B + C - 1) // C * C`` (or
``cdiv(B, C) * C``, ``math.ceil(B / C) * C``), ``xp = F.pad(x, (0, 0, 0, Bp - B))``, then
``xp[s : s + C]`` for ``s in range(0, Bp, C)``: every slice has C rows. The extents, keyed by the
rounding expression:

- ``("multiple", C, key)``: a count rounded up to a multiple of C (``Bp``, ``xp.shape[0]``);
- ``("to_multiple", C, key)``: what that rounding adds to the batch (``Bp - B``);
- ``("multiple_rows", C, key)``: the batch padded by it (rows a multiple of C, the batch's first);
- ``("aligned", C, key)``: a loop index of ``range(0, Bp, C)``, a multiple of C below ``Bp``.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from nodice.gate.static.per_sample import ARGUMENT
from nodice.gate.static.triton_values import dotted
from nodice.gate.static.values import V, int_const

WINDOW, ROWS, SHORT, TILE = "window", "rows", "short", "tile"
MULTIPLE, TO_MULTIPLE, MULTIPLE_ROWS, ALIGNED = "multiple", "to_multiple", "multiple_rows", "aligned"


def window(base: V, width: V, node: ast.AST, lo: V | None = None) -> V | None:
    """``x[lo : lo + C]`` on the batch axis with a constant C > 1: a tile of at most C samples; of
    exactly C where ``x`` is the batch padded to a multiple of C and ``lo`` steps by C through it."""
    c = int_const(width)
    if c is None or c <= 1 or base.batch is None or base.baxis != 0 or width.taint is not None:
        return None
    if (
        lo is not None
        and base.extent is not None
        and base.extent[0] == MULTIPLE_ROWS
        and lo.extent == (ALIGNED, *base.extent[1:3])
        and base.extent[1] == c
    ):
        return _padded(base, c, id(node))
    return V(
        taint=base.taint,
        kind="tensor",
        batch=base.batch,
        rank=base.rank,
        integral=base.integral,
        dtype=base.dtype,
        extent=(WINDOW, c, id(node)),
    )


def rows_of(t: V, v: V) -> V:
    """The batch-axis size ``v`` of tensor ``t``, with the tile's row count attached."""
    if t.extent is not None and t.extent[0] == MULTIPLE_ROWS:
        return dataclasses.replace(v, extent=(MULTIPLE, *t.extent[1:3]))
    if t.extent is None or t.extent[0] not in (WINDOW, TILE):
        return v
    kind, c, key = t.extent[:3]
    return dataclasses.replace(v, extent=(ROWS, c, key)) if kind == WINDOW else V(const=c)


def _ceil_numerator(q: ast.expr, c: int, expr: Any) -> ast.expr | None:
    """The ``n`` of ``(n + C - 1) // C``, ``(n + (C - 1)) // C``, ``cdiv(n, C)``, ``ceil(n / C)``."""
    if isinstance(q, ast.BinOp) and isinstance(q.op, ast.FloorDiv) and int_const(expr(q.right)) == c:
        num = q.left
        if isinstance(num, ast.BinOp) and isinstance(num.op, ast.Sub) and int_const(expr(num.right)) == 1:
            inner = num.left  # (n + C) - 1
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):
                for n, k in ((inner.left, inner.right), (inner.right, inner.left)):
                    if int_const(expr(k)) == c:
                        return n
        if isinstance(num, ast.BinOp) and isinstance(num.op, ast.Add):
            for n, k in ((num.left, num.right), (num.right, num.left)):
                if int_const(expr(k)) == c - 1:
                    return n
        return None
    if not isinstance(q, ast.Call) or q.keywords:
        return None
    name = dotted(q.func).split(".")[-1]
    if name == "cdiv" and len(q.args) == 2 and int_const(expr(q.args[1])) == c:
        return q.args[0]
    arg = q.args[0] if len(q.args) == 1 else None
    if name == "ceil" and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
        return arg.left if int_const(expr(arg.right)) == c else None
    return None


def rounded_up(node: ast.BinOp, a: V, b: V, expr: Any) -> V | None:
    """``(n + C - 1) // C * C`` (either order, or through ``cdiv``/``ceil``) of a batch-dependent n:
    a multiple of C (``None``: not that)."""
    if not isinstance(node.op, ast.Mult):
        return None
    for q, cv in ((node.left, b), (node.right, a)):
        c = int_const(cv)
        if c is None or c <= 1 or cv.taint is not None:
            continue
        n_node = _ceil_numerator(q, c, expr)
        if n_node is None:
            continue
        n = expr(n_node)
        if n.taint is None:
            return None
        return V(taint=n.taint, extent=(MULTIPLE, c, id(node)))
    return None


def to_multiple(a: V, b: V) -> V | None:
    """``Bp - n`` for ``Bp`` the batch rounded up to a multiple: what padding to it adds."""
    if a.extent is None or a.extent[0] != MULTIPLE or b.taint is None or b.kind != "value":
        return None
    return V(taint=a.taint, extent=(TO_MULTIPLE, *a.extent[1:3]))


def aligned(stop: V, start: V, step: V) -> tuple[Any, ...] | None:
    """``range(0, Bp, C)`` with ``Bp`` a multiple of C: the extent of its index."""
    c = int_const(step)
    if stop.extent is None or stop.extent[0] != MULTIPLE or c != stop.extent[1] or int_const(start) != 0:
        return None
    return (ALIGNED, *stop.extent[1:3])


def difference(a: V, b: V) -> V | None:
    """``C - n`` for a tile of C rows: what a pad to C adds (``None``: not that)."""
    if b.extent is None or b.extent[0] != ROWS or int_const(a) != b.extent[1] or a.taint is not None:
        return None
    return V(taint=b.taint, extent=(SHORT, b.extent[1], b.extent[2]))


def allocated(sizes: list[V]) -> tuple[Any, ...] | None:
    """``zeros(C - n, K)`` / ``t.new_zeros((C - n, K))``: the rows a pad adds."""
    first = sizes[0] if sizes else None
    if first is not None and first.kind in ("seq", "shape") and first.items:
        first = first.items[0]
    if first is not None and first.extent is not None and first.extent[0] == SHORT:
        return first.extent
    return None


def _padded(t: V, c: int, key: Any) -> V:
    return V(
        taint=t.taint,
        kind="tensor",
        rank=t.rank,
        integral=t.integral,
        dtype=t.dtype,
        extent=(TILE, c, key, t.batch),
    )


def concatenated(items: list[V], dim: V | None) -> V | None:
    """``cat([t, zeros(C - n, …)])`` along the batch axis (either order): the tile padded to C rows."""
    if len(items) != 2 or (dim is not None and int_const(dim) != 0):
        return None
    for t, pad in (items, items[::-1]):
        if t.kind != "tensor" or t.extent is None or t.extent[0] != WINDOW:
            continue
        if pad.kind == "tensor" and pad.extent == (SHORT, *t.extent[1:3]):
            return _padded(t, t.extent[1], t.extent[2])
    return None


def padded(t: V, pad: V) -> V | None:
    """``F.pad(t, (0, 0, 0, C - n))``: the batch axis' pair is the last one of a rank-r tensor's r pairs.
    ``F.pad(x, (0, 0, 0, Bp - B))`` of the batch: its rows a multiple of C."""
    items = pad.items if pad.kind in ("seq", "shape") else None
    if t.kind != "tensor" or t.rank is None or items is None or len(items) != 2 * t.rank:
        return None
    *others, before, after = items
    if (
        t.extent in (None, ARGUMENT)
        and t.batch is not None
        and t.baxis == 0
        and after.extent is not None
        and after.extent[0] == TO_MULTIPLE
        and all(int_const(v) == 0 for v in (*others, before))
    ):
        return dataclasses.replace(t, extent=(MULTIPLE_ROWS, *after.extent[1:3]))
    if t.extent is None or t.extent[0] != WINDOW:
        return None
    if any(int_const(v) != 0 for v in (*others, before)) or after.extent != (SHORT, *t.extent[1:3]):
        return None
    return _padded(t, t.extent[1], t.extent[2])


def taken_back(base: V, bound: V) -> V | None:
    """``out[:n]`` of a padded tile: the window's rows again."""
    if base.extent is None or base.extent[0] != TILE or bound.extent is None:
        return None
    if bound.extent != (ROWS, base.extent[1], base.extent[2]):
        return None
    return V(
        taint=base.taint,
        kind="tensor",
        batch=base.extent[3],
        rank=base.rank,
        integral=base.integral,
        dtype=base.dtype,
        extent=(WINDOW, base.extent[1], base.extent[2]),
    )


_SHORT_WHEN_TRUE: dict[type[ast.cmpop], bool] = {ast.Lt: True, ast.NotEq: True, ast.GtE: False, ast.Eq: False}
_MIRRORED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
}
_MIRRORED |= {ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def short_test(test: ast.expr, expr: Any) -> tuple[int, Any, bool] | None:
    """``n < C`` (or ``n != C``, ``C > n``, ``n == C``, ``n >= C``) on a tile's row count:
    ``(C, key, short when true)``; ``None``: another test."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right = expr(test.left), expr(test.comparators[0])
    op: type[ast.cmpop] | None = type(test.ops[0])
    if right.extent is not None and left.extent is None:
        left, right = right, left
        op = _MIRRORED.get(op) if op is not None else None
    if left.extent is None or left.extent[0] != ROWS or int_const(right) != left.extent[1]:
        return None
    if op not in _SHORT_WHEN_TRUE:
        return None
    return left.extent[1], left.extent[2], _SHORT_WHEN_TRUE[op]


def full(env: dict[str, V], c: int, key: Any) -> dict[str, V]:
    """The names on the side where the tile has all its C rows: the window is the tile."""
    out = dict(env)
    for name, v in env.items():
        if v.extent is None or v.extent[1:3] != (c, key):
            continue
        if v.extent[0] == WINDOW:
            out[name] = _padded(v, c, key)
        elif v.extent[0] == ROWS:
            out[name] = V(const=c)
        elif v.extent[0] == SHORT:
            out[name] = V(const=0)
    return out


def pads(body: list[ast.stmt]) -> bool:
    """The side calls ``cat``/``concat``/``pad`` somewhere: it may be the one that pads."""
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("cat", "concat", "pad"):
                return True
    return False


def same_values(
    before: dict[str, V], short: dict[str, V], refined: dict[str, V], whole: dict[str, V]
) -> bool:
    """After the two sides of a padding branch, every name they set holds the same kind of value:
    tensors of one dtype (the padded tile on both sides, or neither), equal constants, the same
    function; a name set on one side only is the pad's arithmetic. ``refined``: the names before
    the full side, where the window is the tile."""
    names = {n for n, v in short.items() if before.get(n) is not v}
    names |= {n for n, v in whole.items() if refined.get(n) is not v}
    for n in names:
        a, b = short.get(n), whole.get(n)
        if a is None or b is None:
            one = a or b
            if one is None or one.extent is None or one.extent[0] not in (ROWS, SHORT):
                return False
            continue
        if a.kind == b.kind == "tensor":
            if a.dtype != b.dtype or a.integral != b.integral or a.extent != b.extent:
                return False
        elif a.extent is not None and a.extent[0] in (ROWS, SHORT):
            continue
        elif a.kind != b.kind or a.ref is not b.ref or a.const != b.const or a.opaque or b.opaque:
            return False
    return True
