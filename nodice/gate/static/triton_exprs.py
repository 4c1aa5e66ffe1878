"""Expressions inside a Triton kernel: what each value depends on and which tiles shape it.

Every value carries the labels it depends on and, where it can be inferred, its
block shape as one label set per dimension (the labels of the ``tl.arange``
lengths that built that dimension). A sum-like reduction over a dimension makes
that dimension's labels the tile of a reduction axis.
"""

from __future__ import annotations

import ast
from typing import Any

from nodice.gate.static.triton_values import EMPTY, KV, Shape, broadcast, const_int, dtype_of, union

_ELEMENTWISE = {
    "where",
    "maximum",
    "minimum",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "sqrt_rn",
    "rsqrt",
    "abs",
    "fma",
    "sigmoid",
    "cos",
    "sin",
    "erf",
    "div_rn",
    "fdiv",
    "floor",
    "ceil",
    "clamp",
    "umulhi",
    "softplus",
    "cast",
    "fast_expf",
    "fast_dividef",
    "tanh",
    "log1p",
    "expm1",
    "pow",
    "isnan",
    "isinf",
    "signbit",
}
# Elementwise calls whose result has their value operands' dtype (``where``: not the condition's).
_KEEPS_DTYPE = ("where", "maximum", "minimum", "abs", "clamp")
_PASS_FIRST = {"multiple_of", "max_contiguous", "max_constancy", "assume", "contiguous"}
_SUM_LIKE = {"sum", "reduce", "cumsum", "cumprod", "associative_scan"}
# Reductions whose result cannot depend on the order or grouping of their terms; a sum is one too
# when its terms are integers.
_EXACT = {"max", "min", "argmax", "argmin", "xor_sum"}
_INT_EXACT = {"sum", "cumsum"}
_RNG = {"rand", "randn", "randint", "randint4x", "rand4x", "randn4x", "philox", "philox_impl"}
_QUIET = {"static_print", "device_print", "static_assert", "device_assert", "debug_barrier", "print"}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _value_dtype(values: list[KV]) -> str | None:
    """The dtype family of values combined elementwise: float if one is, int if all are."""
    dtypes = {v.dtype for v in values}
    if "float" in dtypes:
        return "float"
    return "int" if dtypes == {"int"} else None


class KernelExprs:
    """Expression evaluation; subclasses provide ``env``, ``sink``, ``atomic``, ``reduction``."""

    env: dict[str, KV]
    masked: set[str]
    # Per loop-index label: the labels a product scales that index by (``c * chunk``), i.e. what
    # sets the size of the piece each iteration covers.
    scaled: dict[str, set[str]]

    def __init__(self, helpers: dict[str, ast.FunctionDef]):
        self.helpers = helpers

    def sink(self, kind: str, labels: frozenset[str], node: ast.AST) -> None:  # pragma: no cover
        raise NotImplementedError

    def atomic(self, node: ast.AST, certain: bool) -> None:  # pragma: no cover
        raise NotImplementedError

    def reduction(
        self, order_sensitive: bool, dot: bool = False, node: ast.AST | None = None, loop: bool = False
    ) -> None:  # pragma: no cover
        raise NotImplementedError

    def helper_signature(self, nodes: list[ast.AST]) -> None:  # pragma: no cover
        raise NotImplementedError

    def helper_info(self, fn: ast.FunctionDef) -> Any:  # pragma: no cover
        raise NotImplementedError

    def expr(self, node: ast.AST) -> KV:
        t = type(node)
        if t is ast.Name:
            v = self.env.get(node.id)  # type: ignore[attr-defined]
            return v if v is not None else KV(EMPTY, ())
        if t is ast.Constant:
            c = node.value  # type: ignore[attr-defined]
            return KV(EMPTY, (), "float" if isinstance(c, float) else "int" if isinstance(c, int) else None)
        if t is ast.BinOp:
            left, right = self.expr(node.left), self.expr(node.right)  # type: ignore[attr-defined]
            if type(node.op) is ast.Mult:  # type: ignore[attr-defined]
                self._scale(left.deps, right.deps)
                self._scale(right.deps, left.deps)
            return left.combine(right, node.op)  # type: ignore[attr-defined]
        if t is ast.Call:
            return self.call(node)  # type: ignore[arg-type]
        if t is ast.Subscript:
            return self.subscript(node)  # type: ignore[arg-type]
        if t is ast.Attribute:
            base = self.expr(node.value)  # type: ignore[attr-defined]
            if node.attr == "T" and base.shape is not None:  # type: ignore[attr-defined]
                return KV(
                    base.deps, tuple(reversed(base.shape)), base.dtype, base.data, base.reduced, base.extent
                )
            return base
        if t is ast.UnaryOp:
            return self.expr(node.operand)  # type: ignore[attr-defined]
        if t is ast.Compare and len(node.ops) == 1 and type(node.ops[0]) in _ORDERING:  # type: ignore[attr-defined]
            left, right = self.expr(node.left), self.expr(node.comparators[0])  # type: ignore[attr-defined]
            if (left.shape and not left.data) or (right.shape and not right.data):
                for lab in left.deps | right.deps:
                    if lab.startswith("loop:"):
                        self.masked.add(lab)
                # ``offs < n_rows``, ``toks < seq_len``: a validity mask over an index block. It decides
                # which elements exist, not what a valid element computes.
                extent = left.deps | right.deps | left.extent | right.extent
                return KV(EMPTY, broadcast(left.shape, right.shape), "int", extent=extent)
            u = left.combine(right)
            return KV(u.deps, u.shape, "int", u.data, extent=u.extent)
        if t is ast.BoolOp or t is ast.Compare:
            parts = (
                node.values  # type: ignore[attr-defined]
                if t is ast.BoolOp
                else [node.left, *node.comparators]  # type: ignore[attr-defined]
            )
            u = union([self.expr(e) for e in parts])
            return KV(u.deps, u.shape, "int", u.data, extent=u.extent)
        if t is ast.IfExp:
            return union([self.expr(node.test), self.expr(node.body), self.expr(node.orelse)])  # type: ignore[attr-defined]
        if t is ast.Tuple or t is ast.List:
            return union([self.expr(e) for e in node.elts])  # type: ignore[attr-defined]
        return KV(EMPTY, None)

    def _scale(self, index: frozenset[str], by: frozenset[str]) -> None:
        """``c * chunk`` with ``c`` a loop index: ``chunk``'s labels size each iteration's piece."""
        loops = [lab for lab in index if lab.startswith("loop:")]
        if loops and not any(lab.startswith("loop:") for lab in by):
            for lab in loops:
                self.scaled.setdefault(lab, set()).update(by)

    def subscript(self, node: ast.Subscript) -> KV:
        base = self.expr(node.value)
        idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base.shape is None:
            return KV(base.deps, None, base.dtype, base.data, base.reduced, base.extent)
        dims: list[frozenset[str]] = []
        src = list(base.shape)
        for e in idx:
            if isinstance(e, ast.Constant) and e.value is None:
                dims.append(frozenset())
            elif isinstance(e, ast.Slice):
                dims.append(src.pop(0) if src else frozenset())
            elif isinstance(e, ast.Constant) and e.value is Ellipsis:
                keep = len(src) - (len(idx) - len(dims) - 1)
                dims.extend(src[:keep])
                src = src[keep:]
            else:
                if src:
                    src.pop(0)
        return KV(base.deps, (*dims, *src), base.dtype, base.data, base.reduced, base.extent)

    def _mask_extent(self, mask: ast.AST | None) -> frozenset[str]:
        """The labels a load's mask compares its elements with (what decides which ones exist). Read
        for that alone: a mask written inline does not count as masking a loop index, as before."""
        if mask is None:
            return EMPTY
        saved = set(self.masked)
        m = self.expr(mask)
        self.masked = saved
        return m.deps | m.extent

    def _shape_arg(self, node: ast.AST | None) -> Shape | None:
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(self.expr(e).deps for e in node.elts)
        return None

    def call(self, node: ast.Call) -> KV:
        func = node.func
        method_of: KV | None = None
        if type(func) is ast.Attribute:
            op, name = func.attr, ""
            root = func.value
            while type(root) is ast.Attribute:
                root = root.value
            # ``x.to(...)`` on a local value is a method; ``tl.sum(...)`` is a module function.
            if type(root) is not ast.Name or root.id in self.env:
                method_of = self.expr(func.value)
        elif type(func) is ast.Name:
            op = name = func.id
        else:
            op = name = ""
        kw = {k.arg: k.value for k in node.keywords if k.arg} if node.keywords else {}
        args = node.args

        def arg(i: int, key: str) -> ast.AST | None:
            j = i - (1 if method_of is not None else 0)
            if key in kw:
                return kw[key]
            return args[j] if 0 <= j < len(args) else None

        if method_of is not None:
            operand = method_of
        elif args:
            operand = self.expr(args[0])
        else:
            operand = KV(frozenset(), ())

        if op in ("program_id", "num_programs"):
            axis = const_int(arg(0, "axis"))
            prefix = "pid" if op == "program_id" else "nprog"
            return KV(frozenset({f"{prefix}:{axis if axis is not None else 0}"}), (), "int")
        if op == "arange":
            parts = [self.expr(a) for a in args]
            deps = frozenset().union(*(p.deps for p in parts)) if parts else frozenset()
            return KV(deps, (deps,), "int")
        if op in ("zeros", "full", "empty"):
            shape = self._shape_arg(arg(0, "shape"))
            fill_node = arg(1, "value") if op == "full" else None
            fill = self.expr(fill_node) if fill_node is not None else KV()
            return KV(fill.deps, shape, dtype_of(arg(2 if op == "full" else 1, "dtype")))
        if op in ("zeros_like", "full_like"):
            return KV(frozenset(), operand.shape, operand.dtype)
        if op == "load":
            ptr = operand if method_of is None else KV()
            return KV(frozenset(), ptr.shape, None, True, extent=self._mask_extent(arg(1, "mask")))
        if op in ("to", "cast"):
            dtype_node = arg(1, "dtype")
            if isinstance(dtype_node, ast.Name) and dtype_node.id in self.env:
                self.sink("reduction_branch", self.expr(dtype_node).deps, node)  # a precision parameter
            dtype = dtype_of(dtype_node) or operand.dtype
            return KV(operand.deps, operand.shape, dtype, operand.data, operand.reduced, operand.extent)
        if op in _SUM_LIKE or op in _EXACT:
            return self._reduce(node, op, operand, arg(1, "axis"), arg(2, "keep_dims"))
        if op in ("dot", "dot_scaled"):
            return self._dot(node, method_of, args, kw)
        if op in _RNG:
            seed_node, offs_node = arg(0, "seed"), arg(1, "offset")
            seed = self.expr(seed_node) if seed_node is not None else KV()
            offs = self.expr(offs_node) if offs_node is not None else KV()
            self.sink("rng", seed.deps | offs.deps, node)
            return KV(frozenset(), offs.shape, "float" if op in ("rand", "randn") else "int", True)
        if op.startswith("atomic_"):
            return self._atomic(node, op, args, kw)
        if op == "store":
            ptr = self.expr(args[0]) if args else KV()
            val_node = args[1] if len(args) > 1 else kw.get("value")
            val = self.expr(val_node) if val_node is not None else KV()
            if val.data and val.dtype != "int":
                # What a sample's output values depend on (addresses and masks excluded).
                self.sink("output_reduced" if val.reduced else "output", val.deps, node)
            return KV(ptr.deps)
        if op in _QUIET:
            for a in args:
                self.expr(a)
            return KV()
        if op in ("broadcast_to", "reshape", "view"):
            shape = self._shape_arg(arg(1, "shape"))
            return KV(operand.deps, shape, operand.dtype, operand.data, operand.reduced, operand.extent)
        if op in ("trans", "permute"):
            shape = (
                tuple(reversed(operand.shape))
                if operand.shape is not None and len(operand.shape) == 2
                else None
            )
            return KV(operand.deps, shape, operand.dtype, operand.data, operand.reduced, operand.extent)
        if op == "expand_dims":
            axis = const_int(arg(1, "axis"))
            shape = operand.shape
            if shape is not None and axis is not None:
                axis = axis % (len(shape) + 1)
                shape = (*shape[:axis], frozenset(), *shape[axis:])
            else:
                shape = None
            return KV(operand.deps, shape, operand.dtype, operand.data, operand.reduced, operand.extent)
        if op in _PASS_FIRST:
            return operand
        if name in self.helpers and method_of is None:
            return self._helper(node, self.helpers[name], args, kw)
        parts = [self.expr(a) for a in args] + [self.expr(v) for v in kw.values()]
        if method_of is not None:
            parts.insert(0, method_of)
        u = union(parts)
        if op in _ELEMENTWISE:
            dtype = _value_dtype(parts[1:] if op == "where" else parts) if op in _KEEPS_DTYPE else "float"
            return KV(u.deps, u.shape, dtype, u.data, u.reduced, u.extent)
        return KV(u.deps, u.shape if op in ("cdiv",) else None, u.dtype, u.data, u.reduced)

    def _reduce(
        self, node: ast.Call, op: str, operand: KV, axis_node: ast.AST | None, keep: ast.AST | None
    ) -> KV:
        shape = operand.shape
        axis = const_int(axis_node)
        if shape is not None:
            if axis_node is None or (isinstance(axis_node, ast.Constant) and axis_node.value is None):
                reduced, rest = list(shape), []
            elif axis is not None and shape:
                a = axis % len(shape)
                reduced, rest = [shape[a]], [d for i, d in enumerate(shape) if i != a]
                if op in ("cumsum", "cumprod", "associative_scan") or (
                    isinstance(keep, ast.Constant) and keep.value is True
                ):
                    rest = list(shape)
            else:
                reduced, rest = list(shape), []
            labels = frozenset().union(*reduced) if reduced else frozenset()
            out_shape: Shape | None = tuple(rest)
        else:
            labels, out_shape = frozenset(), None
        if op in _SUM_LIKE:
            self.reduction(order_sensitive=operand.dtype != "int", node=node)
        if op in _EXACT or (op in _INT_EXACT and operand.dtype == "int"):
            # Any tile, any split, any order of its terms gives the same bits.
            self.sink("exact_reduction", labels | operand.extent, node)
        elif op in _SUM_LIKE:
            self.sink("reduction_tile", labels, node)
            self.sink("ordered_extent", operand.extent, node)
        # The result folds the masked terms: how many there were no longer shows in it. An argmax or
        # argmin is a position: an integer whatever the operand.
        dtype = "int" if op in ("argmax", "argmin") else operand.dtype
        return KV(operand.deps, out_shape, dtype, operand.data, op in _SUM_LIKE or operand.reduced)

    def _dot(self, node: ast.Call, method_of: KV | None, args: list[ast.expr], kw: dict[str, ast.expr]) -> KV:
        vals = ([method_of] if method_of is not None else []) + [self.expr(a) for a in args]
        if "acc" in kw:
            vals.append(self.expr(kw["acc"]))
        a = vals[0] if vals else KV()
        b = vals[1] if len(vals) > 1 else KV()
        for opt in ("input_precision", "allow_tf32", "max_num_imprecise_acc", "out_dtype"):
            if opt in kw:
                # TF32 or IEEE, fp16 or fp32 accumulation: how the reduction is computed.
                self.sink("reduction_branch", self.expr(kw[opt]).deps, node)
        labels: frozenset[str] = frozenset()
        if a.shape:
            labels |= a.shape[-1]
        if b.shape and len(b.shape) >= 2:
            labels |= b.shape[-2]
        self.reduction(order_sensitive=False, dot=True, node=node)
        self.sink("reduction_tile", labels, node)
        self.sink("ordered_extent", a.extent | b.extent, node)
        shape = (*a.shape[:-1], b.shape[-1]) if a.shape and b.shape and len(b.shape) >= 2 else None
        acc = vals[2] if len(vals) > 2 else KV()
        return KV(a.deps | b.deps | acc.deps, shape, "float", True, True)

    def _atomic(self, node: ast.Call, op: str, args: list[ast.expr], kw: dict[str, ast.expr]) -> KV:
        ptr = self.expr(args[0]) if args else self.expr(kw.get("pointer", ast.Constant(0)))
        val_node = args[1] if len(args) > 1 else kw.get("val")
        val = self.expr(val_node) if val_node is not None else KV()
        for k in ("mask",):
            if k in kw:
                self.expr(kw[k])
        if op in ("atomic_add", "atomic_fadd"):
            if val.dtype == "int":
                pass
            elif val.dtype == "float" or val.reduced:
                self.atomic(node, certain=True)
            elif val.data:
                self.atomic(node, certain=False)
        return KV(ptr.deps | val.deps, val.shape, val.dtype, True)

    def _helper(
        self, node: ast.Call, fn: ast.FunctionDef, args: list[ast.expr], kw: dict[str, ast.expr]
    ) -> KV:
        info = self.helper_info(fn)
        vals = [self.expr(a) for a in args]
        kvals = {k: self.expr(v) for k, v in kw.items()}
        if info is None:
            return union(vals + list(kvals.values()))
        bound: dict[str, KV] = dict(zip(info.params, vals, strict=False))
        bound.update(kvals)
        for s in info.sinks:
            labels = frozenset(lab for lab in s.labels if ":" in lab)
            for lab in s.labels:
                if lab in bound:
                    labels |= bound[lab].deps
            self.sink(s.kind, labels, node)
        for a in info.atomics:
            self.atomic(node, a.certain)
        self.reduction(info.order_sensitive, info.has_dot, loop=info.ordered_loop)
        self.helper_signature(info.reduction_nodes)
        if not info.returns:
            return KV(frozenset(), None, None, False)
        # What the helper returns depends on the arguments its returned values depend on (a row
        # index used only to address a load does not reach the loaded value), and on what the
        # helper itself reads (program ids, loop indices).
        ret = union(info.returns)
        deps: set[str] = set()
        data, reduced = ret.data, ret.reduced
        for lab in ret.deps:
            if lab in bound:
                deps |= bound[lab].deps
                data |= bound[lab].data
                reduced |= bound[lab].reduced
            elif lab not in info.params:
                deps.add(lab)
        return KV(frozenset(deps), None, ret.dtype, data, reduced)
