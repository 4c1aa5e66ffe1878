"""Summaries of ``@triton.jit`` kernels: which parameters shape a reduction, seed random numbers …

The summary is computed once per kernel from its body alone; the launch site
then only asks "does a batch-dependent value reach a parameter (or a grid axis)
that this kernel uses to shape a reduction or to draw random numbers?".

Labels: a kernel parameter's name, ``pid:A`` for ``tl.program_id(A)`` (the
program's position along grid axis A) and ``nprog:A`` for ``tl.num_programs(A)``.
"""

from __future__ import annotations

import ast
from typing import Any

from nodice.gate.static.triton_decorators import read_decorators
from nodice.gate.static.triton_exprs import KernelExprs
from nodice.gate.static.triton_summary import AtomicSite, KernelInfo, KernelSink
from nodice.gate.static.triton_values import KV, dotted, periodic_names

# Order-insensitive accumulations: max/min and bitwise and/or/xor give the same bits in any order
# (so does ``+`` on integers, which the loop tells by the accumulator's dtype).
_EXACT_UPDATES = {"maximum", "minimum", "max", "min", "argmax", "argmin", "xor_sum"}
_EXACT_OPS = (ast.BitOr, ast.BitAnd, ast.BitXor)


def is_jit(fn: ast.FunctionDef) -> bool:
    return any(
        dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] == "jit" for d in fn.decorator_list
    )


def _assigned_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _assigned_names(e)]
    return []


def _names_in(node: ast.AST) -> set[str]:
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Call):
            todo.extend(n.args)
            todo.extend(k.value for k in n.keywords)
            todo.append(n.func)
        elif isinstance(n, ast.BinOp):
            todo += (n.left, n.right)
        else:
            todo.extend(ast.iter_child_nodes(n))
    return out


LoopUpdates = tuple[set[str], set[str], set[str]]


def loop_updates(fn: ast.FunctionDef) -> dict[int, LoopUpdates]:
    """For every loop of a kernel: names updated from their own value, names (re)initialised in it,
    and updates that are not max/min. One pass; each assignment counts for all loops around it."""
    result: dict[int, LoopUpdates] = {}

    def visit(stmts: list[ast.stmt], around: list[LoopUpdates]) -> None:
        for st in stmts:
            if isinstance(st, ast.For | ast.While):
                mine: LoopUpdates = (set(), set(), set())
                result[id(st)] = mine
                visit(st.body, [*around, mine])
                visit(st.orelse, around)
            elif isinstance(st, ast.If | ast.With):
                visit(st.body, around)
                visit(getattr(st, "orelse", []), around)
            elif around and isinstance(st, ast.Assign | ast.AugAssign | ast.AnnAssign):
                _record(st, around)

    visit(fn.body, [])
    return result


def _record(node: ast.Assign | ast.AugAssign | ast.AnnAssign, around: list[LoopUpdates]) -> None:
    if isinstance(node, ast.AugAssign):
        if isinstance(node.target, ast.Name):
            for selfref, _, inexact in around:
                selfref.add(node.target.id)
                if not isinstance(node.op, _EXACT_OPS):
                    inexact.add(node.target.id)
        return
    if node.value is None:
        return
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    used = _names_in(node.value)
    top = dotted(node.value.func).split(".")[-1] if isinstance(node.value, ast.Call) else ""
    if isinstance(node.value, ast.BinOp) and isinstance(node.value.op, _EXACT_OPS):
        top = "max"  # ``acc = acc | bits``: as order-insensitive as a maximum
    for t in targets:
        for name in _assigned_names(t):
            for selfref, reinit, inexact in around:
                if name in used:
                    selfref.add(name)
                    if top not in _EXACT_UPDATES:
                        inexact.add(name)
                else:
                    reinit.add(name)


class _KernelWalker(KernelExprs):
    def __init__(self, info: KernelInfo, helpers: dict[str, ast.FunctionDef], cache: dict[int, KernelInfo]):
        super().__init__(helpers)
        self.info = info
        self.cache = cache
        self.env = {p: KV(frozenset({p}), ()) for p in info.params}
        self.control: frozenset[str] = frozenset()
        self.masked: set[str] = set()  # loop-index labels that some ordering mask compares against
        self.scaled: dict[str, set[str]] = {}
        self.consts: dict[str, Any] = {}  # constexpr flags this specialisation fixes
        self.loop_indices: set[str] = set()  # names of the enclosing loops' indices
        self.updates = loop_updates(info.node)

    # ---- hooks used by the expression evaluator -------------------------------
    def sink(self, kind: str, labels: frozenset[str], node: ast.AST) -> None:
        if any(lab.startswith("loop:") for lab in labels):
            labels = frozenset(lab for lab in labels if not lab.startswith("loop:"))
        if labels:
            line = getattr(node, "lineno", 0)
            self.info.sinks.append(KernelSink(kind, labels, line, ""))

    def atomic(self, node: ast.AST, certain: bool) -> None:
        self.info.atomics.append(AtomicSite(getattr(node, "lineno", 0), "", certain))

    def reduction(
        self, order_sensitive: bool, dot: bool = False, node: ast.AST | None = None, loop: bool = False
    ) -> None:
        self.info.order_sensitive |= order_sensitive
        self.info.has_dot |= dot
        self.info.ordered_loop |= loop
        if node is not None:
            self.info.reduction_nodes.append(node)

    def helper_signature(self, nodes: list[ast.AST]) -> None:
        self.info.reduction_nodes.extend(nodes)

    def helper_info(self, fn: ast.FunctionDef) -> KernelInfo | None:
        if id(fn) in self.cache or len(self.cache) > 64:
            return self.cache.get(id(fn))
        return summarize_kernel(fn, self.helpers, self.cache)

    # ---- statements -------------------------------------------------------------
    def walk(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def bind(self, target: ast.expr, value: KV) -> None:
        # A branch on a parameter picks the constants assigned under it (``if SMALL: BLOCK = 64``),
        # also when a helper computes the constant (``if n_rows > 64: s = _half()``: a helper's
        # result has no known shape). Everything else computed under a branch carries its own
        # dependencies; the condition is a guard (``if start < seq_len:``) that decides whether a
        # value exists, not what it is.
        if self.control and not value.deps and value.shape in ((), None) and not value.data:
            value = KV(value.deps | self.control, value.shape, value.dtype, value.data, value.reduced)
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            for e in target.elts:
                self.bind(e, KV(value.deps, None, value.dtype, value.data, value.reduced))

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            v = self.expr(s.value)
            for t in s.targets:
                self.bind(t, v)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.bind(s.target, self.expr(s.value))
        elif isinstance(s, ast.AugAssign):
            old = self.expr(s.target)
            new = self.expr(s.value)
            self.bind(s.target, old.combine(new, op=s.op))
        elif isinstance(s, ast.For):
            self.loop(s)
        elif isinstance(s, ast.While):
            self.expr(s.test)
            for _ in range(2):
                self.walk(s.body)
        elif isinstance(s, ast.If) and (taken := self._fixed_branch(s.test)) is not None:
            self.walk(s.body if taken else s.orelse)
        elif isinstance(s, ast.If):
            cond = self.expr(s.test)
            params = frozenset(lab for lab in cond.deps if ":" not in lab)
            # Without an else the branch is a guard (``if row < n_rows:``): it decides whether a
            # program works, not how.
            if params and s.orelse and _reduction_signature(s.body) != _reduction_signature(s.orelse):
                # A parameter that picks between two different reductions picks the algorithm.
                self.sink("reduction_branch", params, s)
            saved = self.control
            self.control = saved | cond.deps
            before = dict(self.env)
            self.walk(s.body)
            self.walk(s.orelse)
            self.control = saved
            # A constexpr flag that rewrites a value computed before the branch (``if ROUND: s =
            # s.to(io).to(f32)``) decides what that value is, not whether it exists: after the
            # branch the value depends on the flag. (Guards compare indices with bounds and are
            # runtime values, not constexpr flags.)
            flags = frozenset(lab for lab in params if lab in self.info.constexprs)
            for name, value in list(self.env.items()) if flags else []:
                if name in before and value is not before[name]:
                    deps = value.deps | flags
                    self.env[name] = KV(deps, value.shape, value.dtype, value.data, value.reduced)
            self._periodic_rewrite(s, before)
        elif isinstance(s, ast.Return) and s.value is not None:
            v = self.expr(s.value)
            if self.control:
                v = KV(v.deps | self.control, v.shape, v.dtype, v.data, v.reduced)
            self.info.returns.append(v)
        elif isinstance(s, ast.Expr) and s.value is not None:
            self.expr(s.value)
        elif isinstance(s, ast.With):
            self.walk(s.body)

    def _periodic_rewrite(self, s: ast.If, before: dict[str, KV]) -> None:
        """``if (t + 1) % chunk == 0: acc = …`` in a loop over ``t``: the values beside the loop index
        in a periodic test decide at which iterations a carried value is rewritten (a chunk
        boundary), so after the branch it depends on them, as through ``tl.where(cond, new, acc)``.
        Bound tests (``if t < seq_len:``) stay guards: they say whether an iteration works."""
        labels = frozenset(
            lab
            for n in periodic_names(s.test, self.loop_indices)
            if n in self.env
            for lab in self.env[n].deps
            if ":" not in lab and lab not in self.info.constexprs
        )
        for name, value in list(self.env.items()) if labels else []:
            old = before.get(name)
            if old is not None and value is not old:
                self.env[name] = KV(
                    value.deps | old.deps | labels,
                    value.shape,
                    value.dtype,
                    value.data or old.data,
                    value.reduced or old.reduced,
                )

    def _fixed_branch(self, test: ast.expr) -> bool | None:
        """The side a branch on a fixed constexpr flag takes (``if FLAG:``, ``if not FLAG:``), else None."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        node = test.operand if isinstance(test, ast.UnaryOp) and negate else test
        if isinstance(node, ast.Name) and node.id in self.consts:
            return bool(self.consts[node.id]) != negate
        return None

    def loop(self, s: ast.For) -> None:
        it = s.iter
        start_step: frozenset[str] = frozenset()
        if isinstance(it, ast.Call) and dotted(it.func).split(".")[-1] in ("range", "static_range"):
            bound_args = [self.expr(a) for a in it.args]
            bound = KV(frozenset().union(*(a.deps for a in bound_args)), (), "int")
            if len(bound_args) >= 2:
                start_step = bound_args[0].deps.union(*(a.deps for a in bound_args[2:]))
        else:
            bound = KV(self.expr(it).deps, (), "int")
            start_step = bound.deps
        # A label for the loop index, to see whether the body masks against it.
        marker = f"loop:{id(s)}"
        self.bind(s.target, KV(bound.deps | {marker}, (), "int"))
        before = set(self.env)
        selfref, reinit, inexact = self.updates.get(id(s)) or (set(), set(), set())
        loop_vars = set(_assigned_names(s.target))
        candidates = (selfref & before) - reinit - loop_vars
        snapshot = {n: self.env[n].deps for n in before}
        outer = self.loop_indices
        self.loop_indices = outer | loop_vars
        self.walk(s.body)
        if any(self.env[n].deps != d for n, d in snapshot.items() if n in self.env):
            self.walk(s.body)  # values carried around the loop reach the next iteration
        self.loop_indices = outer
        accumulators = {n for n in candidates if self.env[n].data}
        extent = frozenset().union(*(self.env[n].extent for n in accumulators))
        # A loop that only takes maxima (or ors bits, or adds integers) reduces in any order alike.
        ordered = {n for n in accumulators & inexact if self.env[n].dtype != "int"}
        if accumulators and not ordered:
            self.sink("exact_reduction", bound.deps | extent, s.iter if isinstance(s.iter, ast.Call) else s)
        if accumulators & inexact:
            for n in accumulators:
                v = self.env[n]
                self.env[n] = KV(v.deps, v.shape, v.dtype, v.data, True, v.extent)
            # The loop's start and step decide which elements each program folds and in what steps.
            # Its end decides how many, unless the body masks elements against the loop index: then
            # iterations past the real end are masked no-ops (a causal key loop ending at the
            # query block's end). Not when the end's labels also size the piece each iteration
            # covers (``for c in range(n_chunks)`` over ``c * chunk`` with ``chunk = H // n_chunks``):
            # then they decide how the reduction is cut, masked or not.
            self.reduction(False, node=s.iter, loop=bool(ordered))
            if ordered:
                sizing = bound.deps & self.scaled.get(marker, set())
                labels = bound.deps if marker not in self.masked else start_step | sizing
                self.sink("reduction_bound", labels, s.iter if isinstance(s.iter, ast.Call) else s)
                self.sink("ordered_extent", extent, s.iter if isinstance(s.iter, ast.Call) else s)


_REDUCING_CALLS = {"sum", "reduce", "cumsum", "cumprod", "associative_scan", "dot", "dot_scaled"}


def _reduction_signature(body: list[ast.stmt]) -> list[str]:
    """The reductions a block performs (calls and loop ranges), independent of line numbers."""
    out = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in _REDUCING_CALLS:
                out.append(ast.dump(node, annotate_fields=False))
            elif isinstance(node, ast.For):
                out.append(ast.dump(node.iter, annotate_fields=False))
    return sorted(out)


def _constexprs(fn: ast.FunctionDef) -> set[str]:
    out = set()
    for a in fn.args.args + fn.args.kwonlyargs:
        if a.annotation is not None and dotted(a.annotation).split(".")[-1] == "constexpr":
            out.add(a.arg)
    return out


def summarize_kernel(
    fn: ast.FunctionDef,
    helpers: dict[str, ast.FunctionDef],
    cache: dict[Any, KernelInfo] | None = None,
    module_values: dict[str, ast.expr] | None = None,
    consts: dict[str, Any] | None = None,
) -> KernelInfo:
    """Summary of one jit function (cached by node identity, and specialisation, in ``cache``).

    ``consts``: constexpr parameters with the literal values a launch gives them; a branch on one
    of them (``if OFFSET_BY_ROW:``) then walks only the side that launch compiles."""
    cache = {} if cache is None else cache
    constexprs = _constexprs(fn)
    fixed = {k: v for k, v in (consts or {}).items() if k in constexprs and isinstance(v, bool | int | str)}
    key: Any = (id(fn), tuple(sorted(fixed.items()))) if fixed else id(fn)
    if key in cache:
        return cache[key]
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    info = KernelInfo(fn.name, fn, params, constexprs)
    cache[key] = info
    walker = _KernelWalker(info, helpers, cache)
    walker.consts = fixed
    walker.walk(fn.body)
    read_decorators(info, module_values or {})
    return info
