"""Per-sample sizes computed from the whole batch: ``x.numel() // B``.

``x.numel()`` of a batch argument is the batch size times each sample's element count, so it
depends on the batch; divided by the batch size (``x.shape[0]``, ``len(x)``, or that times sizes
that do not depend on the batch, ``B * C``) it is a sample's own element count, which does not.
The analysis marks the three quantities with ``V.extent`` and clears the quotient. Only an
argument the task declares with a batch axis and no batch-dependent other axes is marked, as it
came: a tensor made from it (a gather, a masked selection, a piece) may have another number of rows.

- ``("batch",)``: such an argument;
- ``("bsize",)``: its batch size, or that times a batch-independent value;
- ``("bnumel",)``: its element count.
"""

from __future__ import annotations

import ast

from nodice.gate.static.values import V

ARGUMENT, BSIZE, BNUMEL = ("batch",), ("bsize",), ("bnumel",)


def size_of(t: V, v: V) -> V:
    """The batch-axis size ``v`` of tensor ``t``, marked when ``t`` is a batch argument as it came."""
    return V(taint=v.taint, extent=BSIZE) if t.extent == ARGUMENT else v


def numel_of(t: V, v: V) -> V:
    return V(taint=v.taint, extent=BNUMEL) if t.extent == ARGUMENT else v


def arithmetic(op: ast.operator, a: V, b: V) -> V | None:
    """``B * C`` (C batch-independent) is still a batch size times a per-sample quantity; a batch
    argument's element count divided by one of those is per-sample. ``None``: neither."""
    if isinstance(op, ast.Mult):
        for s, c in ((a, b), (b, a)):
            if s.extent == BSIZE and c.kind == "value" and c.taint is None and not c.opaque:
                return V(taint=s.taint, extent=BSIZE)
        return None
    if isinstance(op, ast.FloorDiv | ast.Div) and a.extent == BNUMEL and b.extent == BSIZE:
        return V()
    return None
