"""Evaluating Python expressions to abstract values: names, attributes, subscripts, operators.

Batch sources are recognised here: ``x.shape[0]``, ``B, H = x.shape``, ``len(x)``
(in calls), ``x.numel()`` (in calls) on an argument that carries the batch axis,
and names the contract declares as batch symbols when their origin is unknown.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import operator
from typing import TYPE_CHECKING, Any

import nodice.gate.static.nn_modules as nn_modules
import nodice.gate.static.per_sample as per_sample
import nodice.gate.static.tiles as tiles
from nodice.gate.static.branches import ifexp_branch
from nodice.gate.static.pins import short_circuit, truth
from nodice.gate.static.precision import DTYPE_FROM_BATCH, dtype_sides, dtype_step
from nodice.gate.static.values import (
    NO_CONST,
    UNKNOWN,
    Trace,
    V,
    extend,
    first_taint,
    join,
    join_all,
    unknown_key_taint,
)

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

# The trace step of a tensor picked by a batch-dependent ``a if cond else b``: which computation
# ran depends on the batch, as with an ``if`` (an algorithm choice), not the values themselves.
CHOSEN_TENSOR = "batch-dependent choice between tensors"
# The trace step of a reduction over a piece whose extent the batch decided (torch_calls.PARTIAL_RESULT).
PARTIAL = "a partial result"


def shape_value(t: V, node: ast.AST, ip: Any) -> V:
    """``t.shape`` for a tensor: the batch axis tainted, the other axes clean."""
    rank = t.rank
    if t.batch is None:
        items = [V() for _ in range(rank)] if rank is not None else None
        if items and t.extent is not None:
            items[0] = tiles.rows_of(t, items[0])
        return V(kind="shape", items=items, extent=t.extent)
    src = f"batch source: {ip.src(node)}[{t.baxis}]"
    step = ip.step
    items = None
    if rank is not None:
        items = [V() for _ in range(rank)]
        items[t.baxis] = per_sample.size_of(t, tiles.rows_of(t, V(taint=(step(node, src),))))
        for axis in t.ctx:
            if -rank <= axis < rank:
                note = f"batch context: {ip.src(node)}[{axis}] depends on the batchmates"
                items[axis] = V(taint=(step(node, note),))
    return V(
        kind="shape",
        items=items,
        batch=(step(node, src),),
        baxis=t.baxis,
        rank=rank,
        ctx=t.ctx,
        extent=t.extent,
    )


def shape_item(shape: V, index: Any, node: ast.AST, ip: Any) -> V:
    step = ip.step
    if not isinstance(index, int):
        return V(taint=shape.batch, opaque=True)
    if shape.items is not None:
        if -len(shape.items) <= index < len(shape.items):
            v = shape.items[index]
            return V(taint=(step(node, f"batch source: {ip.src(node)}"),), extent=v.extent) if v.taint else v
        return V()
    if shape.batch is not None and (index == shape.baxis or index in shape.ctx):
        rows = V(taint=(step(node, f"batch source: {ip.src(node)}"),))
        if index != shape.baxis:
            return rows
        return per_sample.size_of(V(extent=shape.extent), tiles.rows_of(V(extent=shape.extent), rows))
    return V(opaque=shape.batch is not None and index < 0)


_BUILTINS = frozenset(dir(builtins))


class ExprMixin:
    an: Analysis
    mod: ModuleInfo
    env: dict[str, V]
    closure: dict[str, V]
    module_level: bool
    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def call(self, node: ast.Call) -> V: ...

        def instance_attr(self, obj: V, name: str) -> V | None: ...

        def bind_loop_target(self, target: ast.AST, it: V, node: ast.AST) -> bool: ...

        def shape_tuned(self, fn: str, operands: list[V], node: ast.AST) -> None: ...

        def raising(self, taint: Trace, node: ast.AST, note: str) -> None: ...

    # Provided by the interpreter / call mixins.

    def lookup(self, name: str) -> V | None:
        if name in self.env:
            return self.env[name]
        if name in self.closure:
            return self.closure[name]
        return self.mod.env.get(name)

    def name_value(self, node: ast.Name) -> V:
        v = self.lookup(node.id)
        if v is None:
            if node.id in _BUILTINS:
                return V(kind="py", ref=f"builtins.{node.id}")
            if self.an.contract.is_batch_symbol(node.id):
                return V(taint=(self.step(node, f"batch symbol '{node.id}' (contract)"),))
            return UNKNOWN
        return v

    def expr(self, node: ast.AST | None) -> V:
        if node is None:
            return V(const=None)
        method = _EXPR_DISPATCH.get(type(node))
        if method is None:
            return UNKNOWN
        out: V = method(self, node)
        return out

    def e_Constant(self, node: ast.Constant) -> V:
        return V(const=node.value)

    def e_Name(self, node: ast.Name) -> V:
        return self.name_value(node)

    def e_Starred(self, node: ast.Starred) -> V:
        return self.expr(node.value)

    def e_NamedExpr(self, node: ast.NamedExpr) -> V:
        v = self.expr(node.value)
        self.env[node.target.id] = v
        return v

    def e_JoinedStr(self, node: ast.JoinedStr) -> V:
        parts = [self.expr(v.value) for v in node.values if isinstance(v, ast.FormattedValue)]
        return V(taint=first_taint(*parts))

    def e_Lambda(self, node: ast.Lambda) -> V:
        from nodice.gate.static.program import FuncRef

        defaults = [self.expr(d) for d in node.args.defaults]
        return V(kind="func", ref=FuncRef(self.mod, node, dict(self.env) | self.closure, defaults))

    def e_BinOp(self, node: ast.BinOp) -> V:
        a, b = self.expr(node.left), self.expr(node.right)
        taint = first_taint(a, b)
        if a.kind == "tensor" or b.kind == "tensor":
            t = a if a.kind == "tensor" else b
            if isinstance(node.op, ast.MatMult):
                self.shape_tuned("matmul", [a, b], node)
                ctx, contracted = _matmul_extents(a, b)
                if contracted and taint is None:
                    taint = (
                        self.step(
                            node, f"a product over an axis whose extent depends on the batch: {PARTIAL}"
                        ),
                    )
                return V(taint=taint, kind="tensor", batch=t.batch, rank=t.rank, baxis=t.baxis, ctx=ctx)
            # Elementwise: the operands' batch-dependent extents stay.
            ctx = tuple(sorted({x for v in (a, b) if v.kind == "tensor" and v.rank == t.rank for x in v.ctx}))
            cut = (a.cut or b.cut) if ctx else None
            return V(taint=taint, kind="tensor", batch=t.batch, rank=t.rank, baxis=t.baxis, ctx=ctx, cut=cut)
        multiple = tiles.rounded_up(node, a, b, self.expr)
        if multiple is not None:
            return multiple
        counted = per_sample.arithmetic(node.op, a, b)
        if counted is not None:
            return counted
        if isinstance(node.op, ast.Sub):
            short = tiles.difference(a, b) or tiles.to_multiple(a, b)
            if short is not None:
                return short
        seqs = a.kind in ("seq", "shape") and b.kind in ("seq", "shape")
        if seqs and isinstance(node.op, ast.Add) and a.items is not None and b.items is not None:
            return V(taint=taint, kind="seq", items=a.items + b.items)
        const = _fold(node.op, a.const, b.const)
        return V(taint=taint, const=const, opaque=(a.opaque or b.opaque) and taint is None)

    def e_UnaryOp(self, node: ast.UnaryOp) -> V:
        v = self.expr(node.operand)
        if v.const is not NO_CONST and isinstance(node.op, ast.USub) and isinstance(v.const, int | float):
            return V(taint=v.taint, const=-v.const)
        return V(
            taint=v.taint, kind="tensor" if v.kind == "tensor" else "value", batch=v.batch, opaque=v.opaque
        )

    def visible_pins(self) -> dict[str, Any]:
        """The module's pins this code reads as pins (a local or closure name shadows one)."""
        pins = self.an.pins(self.mod)
        if not pins or self.module_level:
            return pins
        if any(n in self.env or n in self.closure for n in pins):
            return {k: v for k, v in pins.items() if k not in self.env and k not in self.closure}
        return pins

    def e_BoolOp(self, node: ast.BoolOp) -> V:
        # Python stops at the first operand that decides the result; a pin that decides it leaves
        # the operands after it unevaluated (``FAST_PATH and n_rows < 16`` with FAST_PATH = 0).
        n = short_circuit(node, self.visible_pins())
        vals = [self.expr(v) for v in node.values[:n]]
        out = join_all(vals)
        return out.with_taint(first_taint(*vals))

    def e_Compare(self, node: ast.Compare) -> V:
        vals = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        taint = first_taint(*vals)
        t = next((v for v in vals if v.kind == "tensor"), None)
        if t is not None:
            # ``indices >= 0``: elementwise, a mask with the operands' axes (the batch axis among them,
            # a piece's batch-dependent extent too); booleans, which a sum counts exactly.
            batched = next((v for v in vals if v.kind == "tensor" and v.batch is not None), t)
            cut = next((v for v in vals if v.kind == "tensor" and v.ctx and v.rank == batched.rank), None)
            return V(
                taint=taint,
                kind="tensor",
                batch=batched.batch,
                rank=batched.rank,
                baxis=batched.baxis,
                ctx=cut.ctx if cut is not None else (),
                cut=cut.cut if cut is not None else None,
                integral=True,
            )
        return V(taint=taint)

    def e_IfExp(self, node: ast.IfExp) -> V:
        decided = truth(node.test, self.visible_pins())
        if decided is not None:  # pins decide the test: only one side can run
            self.expr(node.test)
            return self.expr(node.body if decided else node.orelse)
        cond = self.expr(node.test)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        out = join(body, orelse)
        if cond.taint is not None and body.kind == orelse.kind == "tensor" and body.dtype != orelse.dtype:
            # ``x.half() if B >= 4 else x``: computed at a precision the batch chose, as after a
            # batch-dependent ``if`` that converts on one side (``gate.static.precision``).
            sides = dtype_sides(body, orelse)
            step = self.step(node, f"batch-dependent choice: a tensor {sides}, {DTYPE_FROM_BATCH}")
            self.an.dtype_branches.setdefault(step, ifexp_branch(self.mod, node))
            return out.retrace(dtype_step(cond.taint, step))
        if cond.taint is not None:
            out = (
                V(
                    taint=_choice_trace(
                        cond.taint,
                        self.step(node, CHOSEN_TENSOR if out.kind == "tensor" else "batch-dependent choice"),
                    ),
                    kind=out.kind,
                    batch=out.batch,
                    rank=out.rank,
                    items=out.items,
                    keys=out.keys,
                    ref=out.ref,
                )
                if out.taint is None
                else out
            )
        return out

    def e_Tuple(self, node: ast.Tuple | ast.List) -> V:
        items = []
        for e in node.elts:
            v = self.expr(e)
            if isinstance(e, ast.Starred) and v.items is not None:
                items.extend(v.items)
            else:
                items.append(v)
        return V(kind="seq", items=items, taint=None)

    e_List = e_Tuple

    def e_Set(self, node: ast.Set) -> V:
        return V(kind="seq", items=[self.expr(e) for e in node.elts])

    def e_Dict(self, node: ast.Dict) -> V:
        keys: dict[Any, V] = {}
        extra: list[V] = []
        for k, v in zip(node.keys, node.values, strict=True):
            kv = self.expr(k) if k is not None else None
            vv = self.expr(v)
            if kv is not None and kv.const is not NO_CONST and kv.taint is None:
                try:
                    keys[kv.const] = vv
                    continue
                except TypeError:
                    pass
            extra.append(vv if kv is None else vv.with_taint(kv.taint))
        if extra:
            for i, e in enumerate(extra):
                keys[("?", i)] = e
        return V(kind="dict", keys=keys)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> V:
        saved = dict(self.env)
        selected = None
        for gen in node.generators:
            it = self.expr(gen.iter)
            self.bind_loop_target(gen.target, it, gen)
            for cond in gen.ifs:
                selected = selected or self.expr(cond).taint
        elt = self.expr(node.value if isinstance(node, ast.DictComp) else node.elt)
        if selected is not None and elt.taint is None:
            # ``next(c for c in CONFIGS if m <= c.max_m)``: the filter picks the element.
            elt = elt.with_taint(extend(selected, self.step(node, "selected by a batch-dependent condition")))
        if isinstance(node, ast.DictComp):
            elt = elt.with_taint(self.expr(node.key).taint)
        self.env = saved
        return V(kind="seq", items=None, taint=elt.taint, ref=elt)

    e_ListComp = e_SetComp = e_GeneratorExp = e_DictComp = _comprehension

    def e_Attribute(self, node: ast.Attribute) -> V:
        base = self.expr(node.value)
        attr = node.attr
        if base.kind == "tensor":
            if attr == "shape":
                return shape_value(base, node.value, self)
            if attr in ("T", "mT", "H", "mH"):
                return V(taint=base.taint, kind="tensor", rank=base.rank)
            if attr in ("dtype", "device", "is_cuda", "layout", "ndim", "itemsize"):
                return V()
            return V(kind="method", ref=(base, attr))
        if base.kind == "instance" or base.kind == "class":
            found = self.instance_attr(base, attr)
            if found is not None:
                return found.with_taint(base.taint) if found.kind != "func" else found
            return V(taint=base.taint, opaque=True)
        if base.kind == "module":
            v = base.ref.env.get(attr)
            return v if v is not None else UNKNOWN
        if base.kind == "py":
            return V(kind="py", ref=f"{base.ref}.{attr}")
        if base.kind == "nnmodule":
            return nn_modules.attribute(attr)
        if base.kind == "dict" and attr in ("get", "items", "values", "keys", "setdefault", "update", "pop"):
            return V(kind="method", ref=(base, attr))
        if base.kind in ("seq", "generator", "shape") or base.kind == "value":
            return V(kind="method", ref=(base, attr), taint=None)
        return V(taint=base.taint, opaque=True)

    def e_Subscript(self, node: ast.Subscript) -> V:
        base = self.expr(node.value)
        if base.kind in ("kernel", "choice"):
            # ``kernel[grid]``: the launcher; the grid is judged at the call.
            return V(kind="launcher", ref=(base, node.slice))
        idx = self.expr(node.slice)
        if base.kind == "shape":
            if isinstance(node.slice, ast.Slice):
                if base.items is not None:
                    lo = self.expr(node.slice.lower).const if node.slice.lower else None
                    hi = self.expr(node.slice.upper).const if node.slice.upper else None
                    if (lo is None or isinstance(lo, int)) and (hi is None or isinstance(hi, int)):
                        return V(kind="shape", items=base.items[lo:hi])
                return V(kind="shape", batch=base.batch, baxis=base.baxis)
            return shape_item(base, idx.const if idx.const is not NO_CONST else None, node, self)
        if base.kind == "tensor":
            return self.tensor_index(base, node, idx)
        if base.kind == "seq" and base.items is not None:
            if isinstance(idx.const, int) and -len(base.items) <= idx.const < len(base.items):
                return base.items[idx.const].with_taint(base.taint)
            if idx.taint is not None:
                self.raising(idx.taint, node, "an index that depends on the batch can be out of range")
            out = join_all(base.items) if base.items else UNKNOWN
            return out.with_taint(extend(idx.taint, self.step(node, "indexed by a batch-dependent value")))
        if base.kind == "dict" and base.keys is not None:
            if idx.const is not NO_CONST and idx.taint is None:
                try:
                    if idx.const in base.keys:
                        found = base.keys[idx.const].with_taint(base.taint)
                        return found.with_taint(unknown_key_taint(base.keys))
                except TypeError:
                    pass
            if idx.taint is not None:
                self.raising(idx.taint, node, "a lookup keyed by the batch can miss")
            out = join_all(list(base.keys.values())) if base.keys else UNKNOWN
            return out.with_taint(extend(idx.taint, self.step(node, "looked up with a batch-dependent key")))
        taint = first_taint(base, idx)
        if base.kind == "seq" and base.ref is not None and isinstance(base.ref, V):
            return base.ref.with_taint(taint)
        return V(taint=taint, opaque=base.opaque)

    def tensor_index(self, base: V, node: ast.Subscript, idx: V) -> V:
        """Indexing a tensor: a sample's own slice is its data, not a batch quantity."""
        tile = self._tile_index(base, node)
        if tile is not None:
            return tile
        out = self._tensor_index(base, node, idx)
        cut, why = self._batch_cut_axes(base, node)
        if not cut:
            return out
        why = extend(why, self.step(node, "a piece cut at batch-dependent bounds"))
        return dataclasses.replace(out, ctx=tuple(sorted({*out.ctx, *cut})), cut=out.cut or why)

    def _tile_index(self, base: V, node: ast.Subscript) -> V | None:
        """``x[s : s + C]``: a tile of the batch (``gate.static.tiles``); ``t[:n]``: a padded tile's
        rows taken back. ``None``: another index."""
        first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        rest = node.slice.elts[1:] if isinstance(node.slice, ast.Tuple) else []
        if not isinstance(first, ast.Slice) or first.step is not None:
            return None
        if any(not (isinstance(e, ast.Slice) and e.lower is e.upper is e.step is None) for e in rest):
            return None  # other axes indexed or cut: the general rules
        lo, hi = first.lower, first.upper
        if base.extent is not None and hi is not None and (lo is None or _zero(lo)):
            return tiles.taken_back(base, self.expr(hi))
        if (
            lo is None
            or not isinstance(hi, ast.BinOp)
            or not isinstance(hi.op, ast.Add)
            or ast.dump(hi.left) != ast.dump(lo)
        ):
            return None
        return tiles.window(base, self.expr(hi.right), node, self.expr(lo))

    def _batch_cut_axes(self, base: V, node: ast.Subscript) -> tuple[set[int], Trace | None]:
        """Axes of a per-sample dimension that ``x[:, lo:hi]`` cuts at batch-dependent bounds
        (``x[:, i * width:(i + 1) * width]`` with ``width = hidden // pieces(batch)``): the piece's
        extent there depends on the batch, as with ``x.chunk(n(batch), dim)``."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        cut: set[int] = set()
        why: Trace | None = None
        for k, e in enumerate(elts):
            if not isinstance(e, ast.Slice):
                break  # an integer index or a new axis ahead: later positions are not axes any more
            if (k == base.baxis and base.batch is not None) or _fixed_length(e):
                continue
            bounds = first_taint(*(self.expr(b) for b in (e.lower, e.upper, e.step) if b is not None))
            if bounds is not None:
                cut.add(k)
                why = why or bounds
        return cut, why

    def _tensor_index(self, base: V, node: ast.Subscript, idx: V) -> V:
        first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        if isinstance(first, ast.Slice) and _fixed_length(first):
            # ``x[t : t + 1]``: one sample, whatever the batch.
            return V(taint=base.taint, kind="tensor", rank=base.rank)
        keeps_batch = isinstance(first, ast.Slice) or (
            isinstance(first, ast.Constant) and first.value is Ellipsis
        )
        if not isinstance(node.slice, ast.Tuple) and idx.kind == "tensor":
            # ``x[tokens]``: a gather; as many rows as the index has (an expert's load …). Rows of a
            # batch tensor are the samples' own values wherever the index puts them; a table looked
            # up at batch-derived positions (``seeds[arange(B)]``) gives values that depend on them.
            rows = idx.batch or idx.taint or base.batch
            taint = base.taint if base.batch is not None and base.baxis == 0 else base.taint or idx.taint
            return V(taint=taint, kind="tensor", batch=rows, rank=base.rank)
        if base.batch is not None and not keeps_batch and base.baxis == 0:
            return V(taint=base.taint, kind="tensor", rank=base.rank - 1 if base.rank else None)
        return V(
            taint=base.taint,
            kind="tensor",
            batch=base.batch if keeps_batch else None,
            rank=base.rank if keeps_batch else None,
            baxis=base.baxis,
        )

    def e_Call(self, node: ast.Call) -> V:
        return self.call(node)


def _matmul_extents(a: V, b: V) -> tuple[tuple[int, ...], bool]:
    """``a @ b``: the output axes whose extent depends on the batch, and whether the contracted axis
    is one (a product summed over a piece the batch decided)."""
    if a.kind != "tensor" or b.kind != "tensor":
        return (), False
    ra = a.rank if a.rank is not None and a.rank >= 2 else None
    rb = b.rank if b.rank is not None and b.rank >= 2 else None
    contracted = (ra is not None and ra - 1 in a.ctx) or (rb is not None and rb - 2 in b.ctx)
    if ra is None or rb is None:
        return (), contracted
    out_rank = max(ra, rb)
    ctx = {x + out_rank - ra for x in a.ctx if x != ra - 1}
    if rb - 1 in b.ctx:
        ctx.add(out_rank - 1)
    return tuple(sorted(ctx)), contracted


def _choice_trace(trace: Trace, step: str) -> Trace:
    """``trace`` one choice longer; a tensor choice stays visible even when the condition's own
    step is on the same line (``extend`` keeps one step per line)."""
    out = extend(trace, step) or trace
    if out is trace and CHOSEN_TENSOR in step and CHOSEN_TENSOR not in trace[-1]:
        out = (*trace[:-1], f"{trace[-1]}  ({CHOSEN_TENSOR})")
    return out


_BINOPS: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_NUMBER = (int, float, bool)


def _fold(op: ast.operator, a: Any, b: Any) -> Any:
    """``a op b`` for two known numbers (or strings and tuples under ``+``/``*``), else ``NO_CONST``.
    Exponents and shifts are bounded so that a candidate cannot make the analysis build a huge int."""
    fn = _BINOPS.get(type(op))
    if fn is None or a is NO_CONST or b is NO_CONST:
        return NO_CONST
    numbers = isinstance(a, _NUMBER) and isinstance(b, _NUMBER)
    if not numbers and not (isinstance(op, ast.Add | ast.Mult) and isinstance(a, str | tuple | int)):
        return NO_CONST
    if isinstance(op, ast.Pow | ast.LShift) and (not isinstance(b, int) or abs(b) > 256):
        return NO_CONST
    if isinstance(op, ast.Mult) and not numbers and (not isinstance(b, int) or b > 4096):
        return NO_CONST
    try:
        return fn(a, b)
    except (ArithmeticError, TypeError, ValueError):
        return NO_CONST


def _zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value == 0 and not isinstance(e.value, bool)


def _fixed_length(s: ast.Slice) -> bool:
    """``a : a + c`` with a constant ``c`` (or constant bounds): the length does not depend on the batch."""
    lo, hi = s.lower, s.upper
    if s.step is not None:
        return False
    if isinstance(lo, ast.Constant) and isinstance(hi, ast.Constant):
        return True
    return (
        isinstance(hi, ast.BinOp)
        and isinstance(hi.op, ast.Add)
        and isinstance(hi.right, ast.Constant)
        and lo is not None
        and ast.dump(hi.left) == ast.dump(lo)
    )


# Type-keyed dispatch: a getattr on a built name per node costs more than the evaluation itself.
_EXPR_DISPATCH: dict[type, Any] = {
    getattr(ast, name[2:]): fn
    for name, fn in vars(ExprMixin).items()
    if name.startswith("e_") and hasattr(ast, name[2:])
}
