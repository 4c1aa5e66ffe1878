"""Exception handlers: which raises depend on the batch, and what runs when they fire.

A ``try`` body raises for some batches only when an ``if …: raise`` or an ``assert`` tests a
batch-dependent condition, or when an operation fails for some batch-dependent values only: a
lookup keyed by the batch that can miss (``TABLE[m]``, ``SPLITS[m.bit_length()]``), ``next`` of a
batch-filtered generator without a default. Its handlers then run under that condition: what they
assign is batch-dependent, and a handler that computes what the tried path does not is an
algorithm choice. A kernel launch does not count as such a raise: it fails for its constexprs and
launch options (resources), which the launch sinks judge, not for the batch in its grid.
"""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING

from nodice.gate.static.values import Trace, V, extend, merge_envs

if TYPE_CHECKING:
    from nodice.gate.static.program import ModuleInfo


def terminates(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return True
    if isinstance(last, ast.If):
        return terminates(last.body) and terminates(last.orelse)
    return False


class HandlerMixin:
    mod: ModuleInfo
    env: dict[str, V]
    control: Trace | None
    raises: list[list[Trace]]
    _rest: list[ast.stmt]

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

        def run(self, body: list[ast.stmt]) -> None: ...

        def handler_choice(
            self,
            node: ast.Try,
            trace: Trace,
            tried: list[ast.stmt],
            handled: list[ast.stmt],
            handler: ast.ExceptHandler,
        ) -> None: ...

    def s_Try(self, s: ast.Try) -> None:
        rest = self._rest
        before = self.env
        self.env = dict(before)
        self.raises.append([])
        try:
            self.run(s.body)
        finally:
            raised = self.raises.pop()
        self.run(s.orelse)
        env_tried = self.env
        tried = [*s.body, *s.orelse]
        saved_control = self.control
        if raised:
            # What a handler assigns, it assigns only when the batch-dependent raise fired.
            self.control = extend(raised[0], self.step(s, "handled when it raises"))
        outcomes = [] if terminates(tried) else [env_tried]
        for h in s.handlers:
            self.env = merge_envs(before, env_tried)  # the body ran up to the raise, or not at all
            if h.name:
                self.env[h.name] = V()
            self.run(h.body)
            if not terminates(h.body):
                outcomes.append(self.env)
            if raised:
                tried_path = tried if terminates(tried) else [*tried, *rest]
                handled_path = h.body if terminates(h.body) else [*h.body, *rest]
                self.handler_choice(s, raised[0], tried_path, handled_path, h)
        self.control = saved_control
        # Either path may have run: what follows sees the values of both (of the one that goes on,
        # when the other returns).
        self.env = functools.reduce(merge_envs, outcomes) if outcomes else env_tried
        self.run(s.finalbody)

    def raising(self, taint: Trace, node: ast.AST, note: str) -> None:
        """Inside a ``try``, an operation that raises for some batches only (a lookup keyed by the
        batch that can miss): the handlers run under that condition."""
        if self.raises:
            self.raises[-1].append(extend(taint, self.step(node, note)) or taint)

    def s_Assert(self, s: ast.Assert) -> None:
        cond = self.expr(s.test)
        if cond.taint is not None and self.raises:
            fails = self.step(s, "fails under a batch-dependent condition")
            self.raises[-1].append(extend(cond.taint, fails) or cond.taint)

    s_TryStar = s_Try
