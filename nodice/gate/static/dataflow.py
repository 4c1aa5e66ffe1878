"""The Python dataflow engine: modules, functions and statements, with control dependence.

One :class:`Interp` runs one function body (or a module's top level) over
abstract values. Calls into functions of the candidate's own files are analysed
with the caller's argument values (context-sensitive, memoised), so flows cross
functions, classes and sibling modules. A branch on a batch-dependent condition
taints what it assigns, and is itself a finding when its sides run different
kernels or algorithms.
"""

from __future__ import annotations

import ast
import contextlib
import functools
from typing import Any

import nodice.gate.static.tiles as tiles
from nodice.gate.static.branches import ASSIGNED_UNDER_BRANCH, RETURNED_UNDER_BRANCH
from nodice.gate.static.calls import CallMixin
from nodice.gate.static.expressions import ExprMixin
from nodice.gate.static.handlers import HandlerMixin, terminates
from nodice.gate.static.loops import LoopMixin
from nodice.gate.static.module_state import StateMixin
from nodice.gate.static.pins import truth
from nodice.gate.static.precision import PrecisionMixin
from nodice.gate.static.program import (
    MAX_STEPS,
    Analysis,
    BudgetExceeded,
    ClassRef,
    FuncRef,
    KernelRef,
    ModuleInfo,
)
from nodice.gate.static.torch_calls import TorchMixin
from nodice.gate.static.triton_kernels import is_jit
from nodice.gate.static.triton_launch import LaunchMixin
from nodice.gate.static.values import NO_CONST, Trace, V, extend, first_taint, merge_envs


def _raises_only(body: list[ast.stmt]) -> bool:
    return (
        bool(body)
        and all(isinstance(s, ast.Raise | ast.Expr | ast.Pass) for s in body)
        and isinstance(body[-1], ast.Raise)
    )


def _is_size(node: ast.expr, sizes: frozenset[str]) -> bool:
    """``x.shape[0]``, ``x.size(0)``, ``x.numel()``, ``len(x)``, or a name bound to one of them."""
    if isinstance(node, ast.Name):
        return node.id in sizes
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("size", "numel", "nelement"):
            return True
        return isinstance(f, ast.Name) and f.id == "len"
    return False


def size_names(body: list[ast.stmt]) -> frozenset[str]:
    """Names a function binds straight to a size: ``B, H = x.shape``, ``n = x.numel()``, ``B = len(x)``."""
    out: set[str] = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and _is_size(value, frozenset()):
            out.add(target.id)
        elif (
            isinstance(target, ast.Tuple)
            and isinstance(value, ast.Attribute)
            and value.attr == "shape"
            and all(isinstance(e, ast.Name) for e in target.elts)
        ):
            out.update(e.id for e in target.elts if isinstance(e, ast.Name))
    return frozenset(out)


def _empty_batch_test(test: ast.expr, sizes: frozenset[str] = frozenset()) -> bool:
    """Whether the batch is empty or not: ``B == 0``, ``B < 1``, ``not B``, ``x.numel() == 0``, and
    their negations ``B > 0``, ``B >= 1``, ``B != 0``, ``if B:`` on a size. Either side of such a
    branch has no sample, or every sample, so its choice is not one a sample could see."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        # ``not B`` on a size, or the negation of another such test; ``not (B > 8)`` is a threshold.
        return _empty_batch_test(test.operand, sizes)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_empty_batch_test(v, sizes) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if isinstance(right, ast.Constant) and isinstance(right.value, int):
            op, n = test.ops[0], right.value
            if (isinstance(op, ast.Eq | ast.LtE) and n == 0) or (isinstance(op, ast.Lt) and n == 1):
                return True
            nonempty = (isinstance(op, ast.Gt | ast.NotEq) and n == 0) or (isinstance(op, ast.GtE) and n == 1)
            return nonempty and _is_size(test.left, sizes)
    return _is_size(test, sizes)


class Interp(
    ExprMixin, CallMixin, TorchMixin, LaunchMixin, LoopMixin, HandlerMixin, StateMixin, PrecisionMixin
):
    """Abstract execution of one function body (or a module's or class's top level)."""

    def __init__(
        self,
        an: Analysis,
        mod: ModuleInfo,
        env: dict[str, V],
        closure: dict[str, V] | None = None,
        module_level: bool = False,
    ):
        self.an = an
        self.mod = mod
        # The interpreter of a module's top level runs in the module's namespace (``mod.env``: where
        # its functions read their globals, its importers its names, and ``global`` stores write).
        self._namespace = env is mod.env
        self._env = env
        self.closure = closure or {}
        self.module_level = module_level
        self.control: Trace | None = None
        self.returns: list[V] = []
        self.loops: list[int | None] = []
        self.seeded_loops: set[int] = set()
        self.scope_body: list[ast.stmt] = []  # the function (or module) body being run
        self._rest: list[ast.stmt] = []
        # Set by a branch the pins decide whose taken side returns or raises: the statements after
        # it in the body being run never run, for any batch.
        self._unreached = False
        # Per enclosing ``try``: the batch-dependent conditions under which its body raises (an
        # ``if …: raise`` or an ``assert``); its handlers run under them.
        self.raises: list[list[Trace]] = []
        self._sizes: dict[int, frozenset[str]] = {}  # names bound to sizes, per scope body
        self.declared_globals: set[str] = set()  # ``global`` names of the function being run

    @property
    def env(self) -> dict[str, V]:
        return self._env

    @env.setter
    def env(self, env: dict[str, V]) -> None:
        """A block replaces the environment (a loop joins what its body bound with the state before
        it, a branch merges its sides, a ``try`` its outcomes, a comprehension restores the one it
        saved): at a module's top level the module's namespace is replaced with it, so that the
        names bound after the block (a ``def`` after a ``for``) are bound where every reader looks."""
        self._env = env
        if self._namespace:
            self.mod.env = env

    def step(self, node: ast.AST, note: str = "") -> str:
        line = getattr(node, "lineno", 0)
        text = self.mod.lines[line - 1].strip() if 0 < line <= len(self.mod.lines) else ""
        where = f"line {line}" if self.mod.is_candidate else f"{self.mod.display} line {line}"
        return f"{where}: {text}" + (f"  ({note})" if note else "")

    def src(self, node: ast.AST) -> str:
        """The source text of an expression (its first line), cheaper than ``ast.unparse``."""
        line = getattr(node, "lineno", 0)
        if not 0 < line <= len(self.mod.lines):
            return "?"
        text = self.mod.lines[line - 1]
        start = getattr(node, "col_offset", 0)
        end = getattr(node, "end_col_offset", None) if getattr(node, "end_lineno", line) == line else None
        return text[start:end].strip() if end is not None else text[start:].strip() + " …"

    def in_sample_loop(self) -> int | None:
        for loop in reversed(self.loops):
            if loop is not None:
                return loop
        return None

    # ---- blocks ---------------------------------------------------------------------
    def run(self, body: list[ast.stmt]) -> None:
        saved = self.control
        dispatch = _stmt_dispatch()
        an = self.an
        an.steps += len(body)
        if an.steps > MAX_STEPS:
            raise BudgetExceeded
        for i, s in enumerate(body):
            method = dispatch.get(type(s))
            if method is not None:
                if type(s) is ast.If or type(s) is ast.Try:
                    self._rest = body[i + 1 :]
                method(self, s)
                if self._unreached:
                    self._unreached = False
                    break
        self.control = saved

    def assign(self, target: ast.AST, value: V, node: ast.AST) -> None:
        if self.control is not None and value.taint is None and value.kind not in ("module", "class"):
            value = value.with_taint(extend(self.control, self.step(node, ASSIGNED_UNDER_BRANCH)))
        elif value.taint is not None:
            value = value.retrace(extend(value.taint, self.step(node)))
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            if target.id in self.declared_globals and not self.module_level:
                self.store_global(self.mod, target.id, value)
            self.protected_assignment(target.id, value, node)
        elif isinstance(target, ast.Tuple | ast.List):
            self.unpack(target, value, node)
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value)
            if obj.kind in ("instance", "class") and obj.ref is not None:
                attrs = obj.ref.attrs if obj.kind == "instance" else obj.ref.env
                self.store_slot(attrs, target.attr, value)
            elif obj.kind == "module" and obj.ref is not None:
                self.store_global(obj.ref, target.attr, value)
            self.protected_assignment(target.attr, value, node)
        elif isinstance(target, ast.Subscript):
            container = self.expr(target.value)
            key = self.expr(target.slice)
            if container.kind == "dict" and container.keys is not None:
                if key.const is not NO_CONST and key.taint is None:
                    with contextlib.suppress(TypeError):  # an unhashable constant key
                        self.store_slot(container.keys, key.const, value)
                else:
                    container.keys[("?", len(container.keys))] = value.with_taint(key.taint)
            elif container.kind == "seq" and container.items is not None and value.taint is not None:
                container.items.append(value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, V(kind="seq", taint=value.taint), node)

    def unpack(self, target: ast.Tuple | ast.List, value: V, node: ast.AST) -> None:
        elts = target.elts
        src = self.src(node.value) if isinstance(node, ast.Assign) else "shape"

        def source(i: int) -> V:
            return V(taint=(self.step(node, f"batch source: {src}[{i}]"),))

        if value.kind in ("seq", "shape") and value.items is not None and len(value.items) == len(elts):
            for i, (e, v) in enumerate(zip(elts, value.items, strict=True)):
                if value.kind == "shape" and v.taint is not None:
                    v = source(i)
                self.assign(e, v.with_taint(value.taint), node)
            return
        for i, e in enumerate(elts):
            if value.kind == "shape":
                v = source(i) if value.batch is not None and i == value.baxis else V()
            elif value.kind == "tensor":
                v = V(taint=value.taint, kind="tensor", batch=value.batch)
            else:
                v = V(taint=value.taint, opaque=value.opaque)
            self.assign(e, v, node)

    def protected_assignment(self, name: str, value: V, node: ast.AST) -> None:
        """``num_splits = f(B)``: reported even if the value then leaves through a path we cannot see."""
        if value.taint is not None:
            p = self.an.contract.protected_for(name)
            if p is not None:
                self.report_protected(p, name, value.taint, node, f"assigned to {name}", weak=True)
        elif (
            value.opaque
            and self.an.contract.is_batch_symbol(name)
            and isinstance(node, ast.Assign | ast.AnnAssign)
        ):
            self.env[name] = V(taint=(self.step(node, f"batch symbol '{name}' (contract)"),))

    # ---- statements ------------------------------------------------------------------------
    def s_Assign(self, s: ast.Assign) -> None:
        v = self.expr(s.value)
        for t in s.targets:
            self.assign(t, v, s)

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is not None:
            self.assign(s.target, self.expr(s.value), s)

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        old = self.expr(s.target)
        new = self.expr(s.value)
        taint = first_taint(old, new)
        combined = V(
            taint=taint,
            kind=old.kind if old.kind in ("tensor", "seq") else "value",
            batch=old.batch,
            items=old.items,
            rank=old.rank,
        )
        self.assign(s.target, combined, s)

    def s_Expr(self, s: ast.Expr) -> None:
        self.expr(s.value)

    def s_Return(self, s: ast.Return) -> None:
        v = self.expr(s.value) if s.value is not None else V(const=None)
        if v.taint is not None:
            v = v.retrace(extend(v.taint, self.step(s)))
        elif self.control is not None:
            v = v.with_taint(extend(self.control, self.step(s, RETURNED_UNDER_BRANCH)))
        self.returns.append(v)

    def s_FunctionDef(self, s: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if isinstance(s, ast.FunctionDef) and is_jit(s):
            self.env[s.name] = V(kind="kernel", ref=KernelRef(self.mod, s))
            return
        defaults = [self.expr(d) for d in s.args.defaults]
        kw_defaults = {
            a.arg: self.expr(d) for a, d in zip(s.args.kwonlyargs, s.args.kw_defaults, strict=True) if d
        }
        closure = {} if self.module_level else {**self.closure, **self.env}
        self.env[s.name] = V(kind="func", ref=FuncRef(self.mod, s, closure, defaults, kw_defaults))

    s_AsyncFunctionDef = s_FunctionDef

    def s_ClassDef(self, s: ast.ClassDef) -> None:
        bases = [self.expr(b) for b in s.bases]
        body = Interp(self.an, self.mod, {}, closure=self.env, module_level=True)
        body.run(s.body)
        env = body.env  # what the body bound, after the blocks in it (a loop, a branch) replaced it
        fields = [
            st.target.id for st in s.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
        ]
        self.env[s.name] = V(kind="class", ref=ClassRef(self.mod, s, env, bases, fields))

    def s_Import(self, s: ast.Import) -> None:
        for alias in s.names:
            local = alias.asname or alias.name.split(".")[0]
            sib = self.an.sibling(alias.name)
            if sib is not None and (alias.asname or "." not in alias.name):
                self.env[local] = V(kind="module", ref=sib)
            else:
                self.env[local] = V(kind="py", ref=alias.name if alias.asname else alias.name.split(".")[0])

    def s_ImportFrom(self, s: ast.ImportFrom) -> None:
        modname = s.module or ""
        sib = self.an.sibling(modname) if (s.level or self.an.sibling_exists(modname)) else None
        for alias in s.names:
            local = alias.asname or alias.name
            if alias.name == "*":
                if sib is not None:
                    self.env.update({k: v for k, v in sib.env.items() if not k.startswith("_")})
                continue
            if sib is not None:
                self.env[local] = sib.env.get(alias.name, V(opaque=True))
            elif s.level and not modname:
                sub = self.an.sibling(alias.name)
                self.env[local] = V(kind="module", ref=sub) if sub is not None else V(opaque=True)
            else:
                self.env[local] = V(kind="py", ref=f"{modname}.{alias.name}")

    def s_If(self, s: ast.If) -> None:
        decided = truth(s.test, self.visible_pins())
        if decided is not None:
            # Pins decide the test (``if FAST_PATH and n_rows < 16:`` with FAST_PATH = 0): the
            # other side never runs, for any batch, so it is neither a branch nor a choice. Where the
            # side it takes returns or raises (``if SPLIT_K: return split(…)``), neither does the
            # rest of the body.
            self.expr(s.test)
            taken = s.body if decided else s.orelse
            self.run(taken)
            self._unreached = terminates(taken)
            return
        rest = self._rest
        cond = self.expr(s.test)
        taint = cond.taint
        if taint is not None and self.padding_branch(s):
            return
        if taint is not None and _raises_only(s.body) and not s.orelse and self.raises:
            # Inside a ``try``, a raise is a jump to its handler: the handler's values depend on it.
            self.raises[-1].append(
                extend(taint, self.step(s, "raises under a batch-dependent condition")) or taint
            )
        key = id(self.scope_body)
        sizes = self._sizes.get(key)
        if sizes is None:
            sizes = self._sizes[key] = size_names(self.scope_body)
        if taint is not None and (
            _empty_batch_test(s.test, sizes) or (_raises_only(s.body) and not s.orelse)
        ):
            taint = None
        ctrl = extend(taint, self.step(s, "batch-dependent branch")) if taint is not None else None
        if taint is not None:
            other = s.orelse or (rest if terminates(s.body) else [])
            self.algorithm_choice(s, taint, s.body, other)
        saved_env, saved_control = self.env, self.control
        self.env = dict(saved_env)
        self.control = ctrl or saved_control
        self.run(s.body)
        env_body = self.env
        self.env = dict(saved_env)
        self.run(s.orelse)
        env_else = self.env
        self.control = saved_control
        # After an early return, what follows computes the same values for every batch that reaches
        # it; a different algorithm on the returning side is caught by ``algorithm_choice``.
        if terminates(s.body) and not terminates(s.orelse):
            self.env = env_else
        elif terminates(s.orelse) and not terminates(s.body):
            self.env = env_body
        else:
            if ctrl is not None:
                self.dtype_branch(s, ctrl, env_body, env_else)
            self.env = merge_envs(env_body, env_else)

    def padding_branch(self, s: ast.If) -> bool:
        """``if n < C: t = cat([t, t.new_zeros(C - n, K)])`` on a tile of the batch: when the short
        side pads the tile and otherwise does what the full side does (the same calls, values of the
        same dtypes), the branch chooses nothing the batch could see (``gate.static.tiles``). False,
        nothing run: another branch."""
        test = tiles.short_test(s.test, self.expr)
        if test is None:
            return False
        c, key, short_when_true = test
        short_side, full_side = (s.body, s.orelse) if short_when_true else (s.orelse, s.body)
        if terminates(short_side) or terminates(full_side) or not tiles.pads(short_side):
            return False
        saved = self.env
        self.env = dict(saved)
        self.run(short_side)
        env_short = self.env
        refined = tiles.full(saved, c, key)
        self.env = dict(refined)
        self.run(full_side)
        env_full = self.env
        same_work = self.compute_calls(short_side) == self.compute_calls(full_side) and not (
            self.reshaped_launches(short_side, full_side)
        )
        if not same_work or not tiles.same_values(saved, env_short, refined, env_full):
            self.env = saved
            return False
        self.env = merge_envs(env_short, env_full)
        return True

    def s_With(self, s: ast.With | ast.AsyncWith) -> None:
        for item in s.items:
            v = self.expr(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, v, s)
        self.run(s.body)

    s_AsyncWith = s_With

    def s_Match(self, s: ast.Match) -> None:
        self.expr(s.subject)
        for case in s.cases:
            self.run(case.body)


@functools.cache
def _stmt_dispatch() -> dict[type, Any]:
    return {
        getattr(ast, n[2:]): getattr(Interp, n)
        for n in dir(Interp)
        if n.startswith("s_") and hasattr(ast, n[2:])
    }
