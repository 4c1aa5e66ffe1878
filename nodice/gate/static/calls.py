"""Calls: dispatch, functions and classes of the candidate's files, and the sinks at call sites.

Functions of the candidate's own files are analysed with the caller's argument
values; a parameter or keyword whose name the contract protects is a sink at the
call ("passed as NUM_SPLITS to launch"). Library calls are modelled by name.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nodice.gate.static.choices import ChoiceMixin
from nodice.gate.static.contracts import Protected
from nodice.gate.static.library_calls import LibraryMixin
from nodice.gate.static.triton_values import dotted
from nodice.gate.static.values import NO_CONST, UNKNOWN, Instance, Trace, V, deep_taint, extend, join_all

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ClassRef, FuncRef, ModuleInfo


def _memo_sig(v: V) -> tuple[Any, ...]:
    const = v.const if isinstance(v.const, int | str | bool | float) or v.const is None else NO_CONST
    return (
        v.taint is not None,
        v.kind,
        v.batch is not None,
        id(v.ref) if v.ref is not None else 0,
        const if const is not NO_CONST else "?",
    )


class CallMixin(LibraryMixin, ChoiceMixin):
    an: Analysis
    mod: ModuleInfo
    env: dict[str, V]
    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

    # ---- dispatch -----------------------------------------------------------------
    def call(self, node: ast.Call) -> V:
        fv = self.expr(node.func)
        args: list[V] = []
        for a in node.args:
            v = self.expr(a)
            if isinstance(a, ast.Starred) and v.items is not None:
                args.extend(_carry(v, item) for item in v.items)
            else:
                args.append(v)
        kwargs: dict[str, V] = {}
        for k in node.keywords:
            v = self.expr(k.value)
            if k.arg:
                kwargs[k.arg] = v
            elif v.kind == "dict" and v.keys:
                unpacked = {str(key): _carry(v, val) for key, val in v.keys.items() if isinstance(key, str)}
                kwargs.update(unpacked)
        return self.dispatch(fv, args, kwargs, node)

    def dispatch(self, fv: V, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        kind = fv.kind
        if kind == "launcher":
            return self.launch(fv, args, kwargs, node)  # type: ignore[attr-defined,no-any-return]
        if kind == "choice":
            alts = fv.items or []
            if fv.taint is not None and len(alts) > 1:
                names = ", ".join(sorted({getattr(a.ref, "name", "?") for a in alts}))
                self.an.report(
                    "algorithm_selection_by_batch",
                    self.mod,
                    node,
                    "ALGORITHM",
                    f"a batch-dependent value chooses which function runs ({names})",
                    fv.taint,
                    self.step(node, "calls the chosen function"),
                )
            return join_all([self.dispatch(a, args, kwargs, node) for a in alts])
        if kind == "func":
            return self.call_function(fv.ref, args, kwargs, node)
        if kind == "class":
            return self.instantiate(fv, args, kwargs, node)
        if kind == "instance":
            m = self.instance_attr(fv, "__call__")
            if m is not None:
                return self.dispatch(m, args, kwargs, node)
        if kind == "method":
            recv, name = fv.ref
            return self.method_call(recv, name, args, kwargs, node)
        if kind == "py":
            return self.py_call(fv.ref, args, kwargs, node)
        if kind == "nnmodule":
            return self.nn_module_call(fv, args, kwargs, node)  # type: ignore[attr-defined,no-any-return]
        if kind == "partial":
            f, pargs, pkw = fv.ref
            return self.dispatch(f, pargs + args, {**pkw, **kwargs}, node)
        self.keyword_sinks(kwargs, node, dotted(node.func) or "a function")
        if fv.taint is not None:
            self.an.report(
                "algorithm_selection_by_batch",
                self.mod,
                node,
                "ALGORITHM",
                "a batch-dependent value chooses which function runs",
                fv.taint,
                self.step(node, "calls the chosen function"),
            )
        return V(taint=deep_taint(*args, *kwargs.values()), opaque=True)

    # ---- sinks at calls -----------------------------------------------------------------
    def report_protected(
        self, p: Protected, name: str, trace: Trace, node: ast.AST, what: str, weak: bool = False
    ) -> None:
        if p.mechanism == "work_partitioning":
            rule_id = "split_count_from_batch" if "split" in p.name.lower() else "protected_param_from_batch"
        else:
            rule_id = {"rng": "rng_seed_from_batch", "expert_routing": "expert_routing_from_batch"}.get(
                p.mechanism, "protected_param_from_batch"
            )
        self.an.report(
            rule_id,
            self.mod,
            node,
            p.name,
            f"batch-dependent value {what}",
            trace,
            self.step(node, what),
            mechanism=p.mechanism,
            guidance=p.guidance or None,
            weak=weak,
        )

    def keyword_sinks(self, kwargs: dict[str, V], node: ast.AST, callee: str, rng: bool = False) -> None:
        for k, v in kwargs.items():
            t = deep_taint(v)
            if t is not None:
                p = self.an.contract.protected_for(k, rng)
                if p is not None:
                    self.report_protected(p, k, t, node, f"passed as {k} to {callee}")

    # ---- functions and classes --------------------------------------------------------------
    def call_function(self, fref: FuncRef, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        from nodice.gate.static.dataflow import Interp
        from nodice.gate.static.program import MAX_DEPTH

        fn = fref.node
        a = fn.args
        positional = [p.arg for p in a.posonlyargs + a.args]
        if fref.bound_self is not None:
            args = [fref.bound_self, *args]
        key = (
            id(fn),
            tuple(_memo_sig(v) for v in args),
            tuple(sorted((k, _memo_sig(v)) for k, v in kwargs.items())),
        )
        if id(fn) in self.an.stack or len(self.an.stack) >= MAX_DEPTH:
            return V(taint=deep_taint(*args, *kwargs.values()), opaque=True)
        env: dict[str, V] = {}
        defaults = dict(zip(positional[len(positional) - len(fref.defaults) :], fref.defaults, strict=True))
        kw = dict(kwargs)
        for i, p in enumerate(positional):
            if i < len(args):
                env[p] = args[i]
            elif p in kw:
                env[p] = kw.pop(p)
            else:
                env[p] = defaults.get(p, UNKNOWN)
        if a.vararg is not None:
            env[a.vararg.arg] = V(kind="seq", items=list(args[len(positional) :]))
        for kwarg in a.kwonlyargs:
            name_ = kwarg.arg
            env[name_] = kw.pop(name_) if name_ in kw else fref.kw_defaults.get(name_, UNKNOWN)
        if a.kwarg is not None:
            env[a.kwarg.arg] = V(kind="dict", keys=dict(kw))
        name = fref.name
        self_name = positional[0] if fref.bound_self is not None and positional else None
        for p, v in list(env.items()):
            if p == self_name:
                continue
            if v.taint is not None:
                prot = self.an.contract.protected_for(p)
                if prot is not None:
                    # Followed into the function: what the value does there (a split of a float sum, of
                    # an exact one) explains it; the name alone stands only where nothing does.
                    self.report_protected(prot, p, v.taint, node, f"passed as {p} to {name}", weak=True)
                env[p] = v.retrace(extend(v.taint, self.step(node, f"argument {p} of {name}")))
            elif v.opaque and self.an.contract.is_batch_symbol(p):
                env[p] = V(taint=(self.step(fn, f"batch symbol '{p}' (contract)"),))
        if key in self.an.memo:
            self._raised_in_call(self.an.raise_memo.get(key, []))
            return self.an.memo[key]
        interp = Interp(self.an, fref.module, env, closure=fref.closure)
        interp.scope_body = fn.body if isinstance(fn.body, list) else []
        interp.raises = [[]]  # what the callee raises under batch-dependent conditions, for a caller's try
        self.an.stack.append(id(fn))
        try:
            if isinstance(fn, ast.Lambda):
                result = interp.expr(fn.body)
            else:
                interp.run(fn.body)
                result = join_all(interp.returns) if interp.returns else V(const=None)
        finally:
            self.an.stack.pop()
        self.an.memo[key] = result
        self.an.raise_memo[key] = interp.raises[0] if interp.raises else []
        self._raised_in_call(self.an.raise_memo[key])
        return result

    def _raised_in_call(self, raised: list[Trace]) -> None:
        """A callee that raises under a batch-dependent condition, called inside this function's ``try``."""
        frames: list[list[Trace]] | None = getattr(self, "raises", None)
        if raised and frames:
            frames[-1].extend(raised)

    def class_attr(self, cref: ClassRef, name: str, depth: int = 0) -> V | None:
        if name in cref.env:
            return cref.env[name]
        for b in cref.bases:
            if b.kind == "class" and depth < 8:
                found = self.class_attr(b.ref, name, depth + 1)
                if found is not None:
                    return found
        return None

    def instance_attr(self, obj: V, name: str) -> V | None:
        if obj.kind == "instance":
            inst: Instance = obj.ref
            if name in inst.attrs:
                return inst.attrs[name]
            cref = inst.cls
        else:
            cref = obj.ref
        found = self.class_attr(cref, name)
        if found is not None and found.kind == "func":
            decos = {dotted(d) for d in getattr(found.ref.node, "decorator_list", [])}
            if "staticmethod" in decos:
                return found
            if obj.kind == "instance" or "classmethod" in decos:
                owner = (
                    obj if obj.kind == "instance" or "classmethod" not in decos else V(kind="class", ref=cref)
                )
                bound = V(kind="func", ref=replace(found.ref, bound_self=owner))
                if "property" in decos:
                    return self.call_function(bound.ref, [], {}, found.ref.node)
                return bound
        return found

    def instantiate(self, cls: V, args: list[V], kwargs: dict[str, V], node: ast.Call) -> V:
        cref: ClassRef = cls.ref
        inst = V(kind="instance", ref=Instance(cref))
        init = self.class_attr(cref, "__init__")
        if init is not None and init.kind == "func":
            self.call_function(replace(init.ref, bound_self=inst), args, kwargs, node)
        elif cref.fields:
            bound = dict(zip(cref.fields, args, strict=False)) | kwargs
            for k, v in bound.items():
                inst.ref.attrs[k] = v
                p = self.an.contract.protected_for(k) if v.taint is not None else None
                if p is not None and v.taint is not None:
                    self.report_protected(p, k, v.taint, node, f"passed as {k} to {cref.name}", weak=True)
        return inst


def _carry(container: V, item: V) -> V:
    """An item unpacked from a container (``*args``, ``**kwargs``): a container chosen by the batch
    (``{"BLOCK_H": 256} if n < 16 else {...}``) makes each item it holds depend on the batch too."""
    if container.taint is None or item.taint is not None:
        return item
    return item.with_taint(container.taint)
