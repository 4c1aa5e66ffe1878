"""``triton.autotune`` and ``triton.heuristics`` on a kernel: what the launch cannot see.

The configs of an autotuner are read literally where possible; the entries that
differ between configs (``BLOCK_K``, ``num_warps`` …) are what the tuner may
change from one key to the next.
"""

from __future__ import annotations

import ast
from typing import Any

from nodice.gate.static.triton_exprs import dotted
from nodice.gate.static.triton_kernels import Autotune, KernelInfo

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _resolve(node: ast.expr | None, module_values: dict[str, ast.expr]) -> ast.expr | None:
    seen = 0
    while isinstance(node, ast.Name) and node.id in module_values and seen < 8:
        node = module_values[node.id]
        seen += 1
    return node


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return object()  # unknown: compares unequal to everything


def _config_entries(call: ast.expr) -> dict[str, Any] | None:
    if not isinstance(call, ast.Call) or dotted(call.func).split(".")[-1] != "Config":
        return None
    entries: dict[str, Any] = {}
    kwargs = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "kwargs"), None)
    if isinstance(kwargs, ast.Dict):
        for k, v in zip(kwargs.keys, kwargs.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                entries[k.value] = _literal(v)
    elif kwargs is not None:
        return None
    for kw in call.keywords:
        if kw.arg in _LAUNCH_OPTIONS:
            entries[kw.arg] = _literal(kw.value)
    return entries


def _varying(configs: ast.expr | None) -> tuple[set[str] | None, set[str]]:
    if not isinstance(configs, ast.List | ast.Tuple):
        return None, set()
    parsed = [_config_entries(c) for c in configs.elts]
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
