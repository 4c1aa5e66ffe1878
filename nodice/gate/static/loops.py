"""Loops: which loops walk over the samples of a batch, and values carried from one iteration to the next.

A loop over the samples (``for i in range(B)``, ``enumerate(x)``) binds a
position, which is a batch source where it reaches a sink, and is harmless
otherwise. Its body runs a second time only when the first run tainted a new
name (a value carried around the loop). A loop whose *order* comes from batch
statistics and that adds into something outside it is a finding.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from nodice.gate.static.values import NO_CONST, Trace, V, extend, join_all, merge_envs

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo


def _tainted(env: dict[str, V]) -> frozenset[str]:
    return frozenset(k for k, v in env.items() if v.taint is not None)


class LoopMixin:
    an: Analysis
    mod: ModuleInfo
    env: dict[str, V]
    loops: list[int | None]
    control: Trace | None

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

        def run(self, body: list[ast.stmt]) -> None: ...

        def assign(self, target: ast.AST, value: V, node: ast.AST) -> None: ...

    def s_For(self, s: ast.For | ast.AsyncFor) -> None:
        it = self.expr(s.iter)
        if it.taint is not None and any("(batch statistic" in step for step in it.taint):
            self.accumulation_order(s, it.taint)
        loop_id = id(s) if self.bind_loop_target(s.target, it, s) else None
        self.loops.append(loop_id)
        before = dict(self.env)
        self.run(s.body)
        if _tainted(self.env) != _tainted(before):
            self.run(s.body)  # a value tainted in one iteration reaches the next
        self.env = merge_envs(before, self.env)
        self.loops.pop()
        self.run(s.orelse)

    s_AsyncFor = s_For

    def accumulation_order(self, s: ast.For | ast.AsyncFor, trace: Trace) -> None:
        """A loop whose order comes from batch statistics and that adds into something outside it."""
        defined_inside = {
            t.id
            for n in ast.walk(s)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for n in ast.walk(s):
            target: ast.expr | None = None
            if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add):
                target = n.target
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("add_", "index_add_")
            ):
                target = n.func.value
            root = target
            while isinstance(root, ast.Subscript | ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in defined_inside:
                self.an.report(
                    "accumulation_order_from_batch",
                    self.mod,
                    n,
                    "ORDER",
                    f"{root.id} is accumulated in an order computed from the whole batch",
                    extend(trace, self.step(s, "the loop order depends on the batch")) or trace,
                    self.step(n, "accumulates in that order"),
                )
                return

    def bind_loop_target(self, target: ast.AST, it: V, node: ast.AST) -> bool:
        """Bind a loop variable; True when the loop walks over the samples of the batch."""
        if it.kind == "range":
            over = it.taint is not None
            v = V(taint=extend(it.taint, self.step(node, "position in the batch"))) if over else V()
            if it.extent is not None:  # a multiple of C through the batch padded to one (gate.static.tiles)
                v = dataclasses.replace(v, extent=it.extent)
            self.assign(target, v, node)
            return over
        if it.kind == "enumerate":
            inner: V = it.ref
            over = inner.batch is not None
            pos = V(taint=(self.step(node, "position in the batch"),)) if over else V()
            elem = self.element(inner)
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                self.assign(target.elts[0], pos, node)
                self.assign(target.elts[1], elem, node)
            return over
        if it.kind == "tensor":
            self.assign(target, self.element(it), node)
            return it.batch is not None
        self.assign(target, self.element(it), node)
        return False

    def element(self, it: V) -> V:
        if it.kind == "tensor":
            return V(taint=it.taint, kind="tensor")
        if it.kind in ("seq", "shape") and it.items:
            return join_all(it.items).with_taint(it.taint)
        if it.kind == "seq" and isinstance(it.ref, V):
            return it.ref
        if it.kind == "dict" and it.keys:
            return V(const=NO_CONST)
        return V(taint=it.taint, opaque=True)

    def s_While(self, s: ast.While) -> None:
        """A loop whose condition depends on the batch: what its body assigns depends on how many times
        it ran (``while splits > 1 and B * splits > 256: splits //= 2``)."""
        self.loops.append(None)
        before = dict(self.env)
        saved_control = self.control
        for _ in range(2):  # the condition again after one pass: the body may taint what it tests
            cond = self.expr(s.test)
            if cond.taint is not None and self.control is None:
                self.control = extend(cond.taint, self.step(s, "batch-dependent loop condition"))
            tainted = _tainted(self.env)
            self.run(s.body)
            if _tainted(self.env) == tainted:
                break
        self.control = saved_control
        self.env = merge_envs(before, self.env)
        self.loops.pop()
        self.run(s.orelse)

    s_AsyncFor = s_For
