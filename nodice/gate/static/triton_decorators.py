"""``triton.autotune`` and ``triton.heuristics`` on a kernel: what the launch cannot see.

The configs of an autotuner are read literally where possible; the entries that
differ between configs (``BLOCK_K``, ``num_warps`` …) are what the tuner may
change from one key to the next.
"""

from __future__ import annotations

import ast
from typing import Any

from nodice.gate.static.triton_summary import Autotune, KernelInfo
from nodice.gate.static.triton_values import dotted

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _resolve(node: ast.expr | None, module_values: dict[str, ast.expr]) -> ast.expr | None:
    seen = 0
    while isinstance(node, ast.Name) and node.id in module_values and seen < 8:
        node = module_values[node.id]
        seen += 1
    return node


def _literal(node: ast.AST, env: dict[str, Any] | None = None) -> Any:
    """A literal value, with the names of an enclosing comprehension substituted from ``env``."""
    if env and isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if env and isinstance(node, ast.BinOp):
        a, b = _literal(node.left, env), _literal(node.right, env)
        if isinstance(a, int | float) and isinstance(b, int | float):
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            if type(node.op) in ops:
                return ops[type(node.op)]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return object()  # unknown: compares unequal to everything


def _iter_values(node: ast.expr) -> list[Any] | None:
    if isinstance(node, ast.Call) and dotted(node.func) == "range":
        args = [_literal(a) for a in node.args]
        return list(range(*args)) if all(isinstance(a, int) for a in args) and len(args) <= 3 else None
    value = _literal(node)
    return list(value) if isinstance(value, list | tuple) else None


def _expand(configs: ast.expr) -> list[tuple[ast.expr, dict[str, Any]]] | None:
    """The Config calls of a literal list, or of a comprehension over literal sequences."""
    if isinstance(configs, ast.List | ast.Tuple):
        return [(c, {}) for c in configs.elts]
    if not isinstance(configs, ast.ListComp) or any(g.ifs or g.is_async for g in configs.generators):
        return None
    envs: list[dict[str, Any]] = [{}]
    for gen in configs.generators:
        values = _iter_values(gen.iter)
        if values is None or len(envs) * len(values) > 256:
            return None
        names = (
            [getattr(e, "id", "") for e in gen.target.elts]
            if isinstance(gen.target, ast.Tuple)
            else [getattr(gen.target, "id", "")]
        )
        new = []
        for env in envs:
            for v in values:
                bound = dict(zip(names, v, strict=False)) if len(names) > 1 else {names[0]: v}
                new.append({**env, **bound})
        envs = new
    return [(configs.elt, env) for env in envs]


def _config_entries(call: ast.expr, env: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(call, ast.Call) or dotted(call.func).split(".")[-1] != "Config":
        return None
    entries: dict[str, Any] = {}
    kwargs = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "kwargs"), None)
    if isinstance(kwargs, ast.Dict):
        for k, v in zip(kwargs.keys, kwargs.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                entries[k.value] = _literal(v, env)
    elif kwargs is not None:
        return None
    for kw in call.keywords:
        if kw.arg in _LAUNCH_OPTIONS:
            entries[kw.arg] = _literal(kw.value, env)
    return entries


def _varying(configs: ast.expr | None) -> tuple[set[str] | None, set[str]]:
    expanded = _expand(configs) if configs is not None else None
    if expanded is None:
        return None, set()
    parsed = [_config_entries(c, env) for c, env in expanded]
    if any(p is None for p in parsed) or not parsed:
        return None, set()
    dicts = [p for p in parsed if p is not None]
    names = set().union(*(d.keys() for d in dicts))
    missing = object()
    varying = {n for n in names if len({repr(d.get(n, missing)) for d in dicts}) > 1}
    return varying, {n for n in names if n not in _LAUNCH_OPTIONS}


def read_decorators(info: KernelInfo, module_values: dict[str, ast.expr]) -> None:
    for dec in info.node.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        name = dotted(dec.func).split(".")[-1]
        kw = {k.arg: k.value for k in dec.keywords if k.arg}
        if name == "autotune":
            configs = _resolve(kw.get("configs", dec.args[0] if dec.args else None), module_values)
            key_node = _resolve(kw.get("key", dec.args[1] if len(dec.args) > 1 else None), module_values)
            keys = None
            if isinstance(key_node, ast.List | ast.Tuple):
                keys = [
                    e.value for e in key_node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
            varying, config_params = _varying(configs)
            info.autotune = Autotune(dec.lineno, keys, varying, config_params)
        elif name == "heuristics":
            values = _resolve(kw.get("values", dec.args[0] if dec.args else None), module_values)
            if isinstance(values, ast.Dict):
                for k, v in zip(values.keys, values.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        info.heuristics[k.value] = v
