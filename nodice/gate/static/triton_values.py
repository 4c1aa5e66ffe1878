"""Values inside a Triton kernel (:class:`KV`) and the small helpers the kernel analysis shares."""

from __future__ import annotations

import ast

Shape = tuple[frozenset[str], ...]


def dotted(node: ast.AST) -> str:
    """``tl.math.exp`` for an attribute chain, ``""`` for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def dtype_of(node: ast.AST | None) -> str | None:
    name = dotted(node).split(".")[-1] if node is not None else ""
    if name.startswith(("float", "bfloat", "fp")):
        return "float"
    if name.startswith(("int", "uint")):
        return "int"
    return None


EMPTY: frozenset[str] = frozenset()


class KV:
    """A kernel value: its dependencies, block shape, dtype family, and whether it holds data.

    ``extent``: the labels of the validity masks its elements were loaded under (``s < num_splits``).
    A mask decides which elements exist, not what a valid one is, so these are not dependencies;
    they say which labels decide how many terms a reduction over the value folds.

    A plain slotted class: kernel summaries build thousands of these, and a frozen dataclass
    constructs several times slower.
    """

    __slots__ = ("data", "deps", "dtype", "extent", "reduced", "shape")

    def __init__(
        self,
        deps: frozenset[str] = EMPTY,
        shape: Shape | None = None,
        dtype: str | None = None,  # "int" | "float" | None (unknown)
        data: bool = False,  # derived from memory or a reduction (not just indices)
        reduced: bool = False,  # a sum or an accumulator
        extent: frozenset[str] = EMPTY,
    ):
        self.deps = deps
        self.shape = shape
        self.dtype = dtype
        self.data = data
        self.reduced = reduced
        self.extent = extent

    def combine(self, other: KV, op: ast.AST | None = None) -> KV:
        a, b = self.dtype, other.dtype
        if a == "float" or b == "float" or isinstance(op, ast.Div):
            dtype: str | None = "float"
        elif a == b == "int" or (isinstance(op, _INDEX_OPS) and _index_arithmetic(self, other)):
            dtype = "int"
        else:
            dtype = None
        sa, sb = self.shape, other.shape
        if sa == () or sa == sb:
            shape = sb
        elif sb == ():
            shape = sa
        else:
            shape = broadcast(sa, sb)
        return KV(
            self.deps | other.deps if other.deps else self.deps,
            shape,
            dtype,
            self.data or other.data,
            self.reduced or other.reduced,
            self.extent | other.extent if other.extent else self.extent,
        )


_INDEX_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _index_arithmetic(a: KV, b: KV) -> bool:
    """``pid * seg``: an integer index (a program id, an ``arange``, an integer constant) with a
    scalar parameter of unknown type, neither read from memory: index arithmetic, an integer."""
    for i, p in ((a, b), (b, a)):
        if i.dtype == "int" and not i.data and p.dtype is None and not p.data and p.shape == ():
            return True
    return False


def broadcast(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a2 = (EMPTY,) * (n - len(a)) + a
    b2 = (EMPTY,) * (n - len(b)) + b
    return tuple(x | y for x, y in zip(a2, b2, strict=True))


def union(values: list[KV]) -> KV:
    out = KV(frozenset(), ())
    for v in values:
        out = out.combine(v)
    return out


def const_int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = const_int(node.operand)
        return -inner if inner is not None else None
    return None


def periodic_names(test: ast.expr, loop_indices: set[str]) -> set[str]:
    """The names beside the loop indices in the comparisons of ``test`` that take a loop index
    modulo (or divided by) something: ``chunk`` in ``(t + 1) % chunk == 0``, nothing in ``t < n``."""
    names: set[str] = set()
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        periodic = any(
            isinstance(b, ast.BinOp)
            and isinstance(b.op, ast.Mod | ast.FloorDiv)
            and any(isinstance(m, ast.Name) and m.id in loop_indices for m in ast.walk(b.left))
            for b in ast.walk(cmp)
        )
        if periodic:
            names |= {n.id for n in ast.walk(cmp) if isinstance(n, ast.Name)} - loop_indices
    return names
