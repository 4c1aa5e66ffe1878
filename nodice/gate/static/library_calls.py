"""Calls into builtins and library namespaces (``torch``, ``triton``, ``math``, ``functools`` …), and methods.

These are modelled by name: what their result depends on, which of them hide
the code that runs (left unresolved), and which keywords are protected sinks.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
from typing import TYPE_CHECKING, Any

import nodice.gate.static.per_sample as per_sample
import nodice.gate.static.tiles as tiles
from nodice.gate.static.values import NO_CONST, Trace, V, deep_taint, extend, join_all, unknown_key_taint

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

_IDENTITY_WRAPPERS = {
    "compile",
    "script",
    "trace",
    "lru_cache",
    "cache",
    "wraps",
    "jit",
    "no_grad",
    "inference_mode",
}
_OPAQUE_IMPORTS = {"import_module", "__import__", "exec", "eval", "compile", "reload"}


class LibraryMixin:
    an: Analysis
    mod: ModuleInfo

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def src(self, node: ast.AST) -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

        def raising(self, taint: Trace, node: ast.AST, note: str) -> None: ...

        def keyword_sinks(
            self, kwargs: dict[str, V], node: ast.AST, callee: str, rng: bool = False
        ) -> None: ...

        def tensor_method(
            self, recv: V, fn: str, args: list[V], kwargs: dict[str, V], node: ast.Call
        ) -> V: ...

        def torch_call(self, name: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V: ...

        def rng_seed(self, value: V, node: ast.Call, generator: V | None = None) -> None: ...

        def dispatch(self, fv: V, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V: ...

        def store_slot(self, slots: dict[Any, V], key: Any, value: V) -> None: ...

        def assign(self, target: ast.AST, value: V, node: ast.AST) -> None: ...

    def method_call(self, recv: V, name: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        if recv.kind == "tensor":
            return self.tensor_method(recv, name, args, kwargs, node)
        if recv.kind == "generator" and name == "manual_seed":
            self.rng_seed(args[0] if args else V(), node, generator=recv)
            return recv
        if recv.kind == "dict" and recv.keys is not None:
            if name in ("get", "setdefault", "pop") and args:
                k = args[0]
                if name == "setdefault" and len(args) > 1:
                    # A memo keyed by the batch: what it returns was computed for that batch.
                    stored = args[1].with_taint(k.taint)
                    if k.const is not NO_CONST and k.taint is None:
                        with contextlib.suppress(TypeError):
                            recv.keys.setdefault(k.const, stored)
                    else:
                        recv.keys[("?", len(recv.keys))] = stored
                if k.const is not NO_CONST and k.taint is None:
                    try:
                        found = recv.keys.get(k.const, args[1] if len(args) > 1 else V(const=None))
                        return found.with_taint(unknown_key_taint(recv.keys))
                    except TypeError:
                        pass
                out = join_all(list(recv.keys.values()) + args[1:2])
                return out.with_taint(
                    extend(k.taint, self.step(node, "looked up with a batch-dependent key"))
                )
            if name in ("values", "items"):
                return V(kind="seq", ref=join_all(list(recv.keys.values())))
            if name == "update" and args:
                if args[0].kind == "dict" and args[0].keys:
                    for key, value in args[0].keys.items():
                        self.store_slot(recv.keys, key, value)
                return V(const=None)
        if recv.kind == "seq" and name in ("append", "extend", "insert") and args:
            if recv.items is not None:
                recv.items.append(args[-1])
            return V(const=None)
        self.keyword_sinks(kwargs, node, name)
        return V(taint=deep_taint(recv, *args, *kwargs.values()), opaque=True)

    def py_call(self, name: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        parts = name.split(".")
        root, fn = parts[0], parts[-1]
        if root == "builtins":
            return self.builtin_call(fn, args, kwargs, node)
        if fn in _OPAQUE_IMPORTS and root in ("importlib", "builtins"):
            return self.opaque(node, f"{fn}() hides which code runs")
        if fn in _IDENTITY_WRAPPERS and root in ("torch", "functools", "triton"):
            return (
                args[0]
                if args and args[0].kind in ("func", "kernel", "class")
                else V(kind="py", ref="identity")
            )
        if name == "identity":
            return args[0] if args else V()
        if root == "functools" and fn == "partial" and args:
            return V(kind="partial", ref=(args[0], args[1:], kwargs))
        if fn in ("manual_seed", "seed", "manual_seed_all") and root in ("torch", "random", "numpy"):
            self.rng_seed(args[0] if args else kwargs.get("seed", V()), node)
            return V()
        if root == "torch" and len(parts) > 1 and parts[1] in ("ops", "library", "utils", "cuda", "backends"):
            if fn == "Generator":
                return V(kind="generator", ref={"seeded_loop": None})
            self.keyword_sinks(kwargs, node, name)
            return (
                V(kind="py", ref=f"{name}()")
                if fn == "get_device_properties"
                else V(taint=deep_taint(*args, *kwargs.values()), opaque=True)
            )
        if root in ("torch", "numpy"):
            self.keyword_sinks(kwargs, node, name, rng=True)
            return self.torch_call(name, args, kwargs, node)
        self.keyword_sinks(kwargs, node, name)
        return V(taint=deep_taint(*args, *kwargs.values()), opaque=root not in ("math", "triton"))

    def opaque(self, node: ast.AST, why: str) -> V:
        self.an.report(
            "opaque_dispatch", self.mod, node, "dispatch", why, (), self.step(node, "not followed")
        )
        return V(opaque=True)

    def builtin_call(self, fn: str, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        first = args[0] if args else V()
        key = kwargs.pop("key", None)
        if key is not None and key.kind in ("func", "partial", "choice") and args:
            # ``min(table, key=lambda b: abs(b - m))``: the key decides which element comes out.
            elem = _element(first) if len(args) == 1 else join_all(args)
            picked = self.dispatch(key, [elem], {}, node)
            if picked.taint is not None:
                out = self.builtin_call(fn, args, kwargs, node)
                return out.retrace(
                    extend(picked.taint, self.step(node, f"{fn} ordered by a batch-dependent key"))
                )
        if fn == "len":
            if first.kind == "tensor" and first.extent is not None:
                rows = V(taint=(self.step(node, f"batch source: {self.src(node)}"),))
                return per_sample.size_of(first, tiles.rows_of(first, rows))
            if first.kind == "tensor" and first.batch is not None and first.baxis == 0:
                return per_sample.size_of(
                    first, V(taint=(self.step(node, f"batch source: {self.src(node)}"),))
                )
            if first.kind in ("seq", "shape") and first.items is not None:
                return V(const=len(first.items), taint=first.taint)
            return V(taint=first.taint or (first.batch if first.kind == "shape" else None))
        if fn in ("next", "iter"):
            if fn == "next" and len(args) == 1 and first.taint is not None:
                # ``next(c for c in CONFIGS if m <= c.max_m)`` without a default: no match raises.
                self.raising(first.taint, node, "no element may match: StopIteration")
            return _element(first).with_taint(first.taint) if fn == "next" else first
        if fn == "range":
            ext = tiles.aligned(args[1], args[0], args[2]) if len(args) == 3 and not kwargs else None
            return V(kind="range", taint=deep_taint(*args), extent=ext)
        if fn == "sum" and first.kind == "seq":
            # ``sum(p.sum(-1) for p in pieces)``: a tensor when the elements are tensors.
            elem = _element(first)
            if elem.kind == "tensor":
                return elem.with_taint(deep_taint(first, *args[1:]))
        if fn == "enumerate":
            return V(kind="enumerate", ref=first)
        if fn in ("exec", "eval", "compile", "__import__", "globals", "locals", "vars"):
            return self.opaque(node, f"{fn}() hides which code runs")
        if fn == "getattr" and len(args) >= 2:
            name = args[1]
            if isinstance(name.const, str):
                attr = ast.Attribute(value=node.args[0], attr=name.const, ctx=ast.Load())
                ast.copy_location(attr, node)
                return self.expr(attr)
            if name.taint is not None:
                return V(
                    taint=extend(name.taint, self.step(node, "attribute chosen by a batch-dependent name"))
                )
            return self.opaque(node, "getattr with a computed name hides which code runs")
        if fn == "setattr" and len(args) >= 3:
            if not isinstance(args[1].const, str):
                return self.opaque(node, "setattr with a computed name hides what it changes")
            # ``setattr(_STATE, "block", v)`` is ``_STATE.block = v``.
            target = ast.Attribute(value=node.args[0], attr=args[1].const, ctx=ast.Store())
            ast.copy_location(target, node)
            self.assign(target, args[2], node)
            return V(const=None)
        if fn in ("list", "tuple", "sorted", "reversed", "set", "frozenset"):
            if first.kind in ("seq", "shape"):
                return V(
                    kind="seq",
                    items=list(first.items) if first.items is not None else None,
                    taint=first.taint or (first.batch if first.items is None else None),
                    ref=first.ref,
                )
            return V(kind="seq", taint=first.taint, ref=V(taint=first.taint))
        if fn == "dict":
            return V(kind="dict", keys=dict(kwargs))
        if fn == "zip":
            return V(kind="seq", ref=V(kind="seq", items=[_element(a) for a in args]))
        if fn in (
            "isinstance",
            "issubclass",
            "hasattr",
            "callable",
            "print",
            "id",
            "type",
            "repr",
            "str",
            "format",
        ):
            return V()
        consts = [a.const for a in args]
        const = NO_CONST
        if (
            fn in ("max", "min", "abs", "int", "round")
            and args
            and all(isinstance(c, int | float) and not isinstance(c, bool) for c in consts)
        ):
            const = getattr(builtins, fn)(*consts)
        return V(taint=deep_taint(*args, *kwargs.values()), const=const)


def _element(v: V) -> V:
    if v.kind in ("seq", "shape") and v.items:
        return join_all(v.items)
    if v.kind == "seq" and isinstance(v.ref, V):
        return v.ref
    return V(taint=v.taint, kind="tensor" if v.kind == "tensor" else "value")
