"""Static BI analysis: contract-guided dataflow over the candidate's Python, Triton and native code.

``run_static(path, task)`` returns ``(violations, unresolved)``: violations
reject the candidate; unresolved findings (autotuning, opaque dispatch …) are
left to dynamic validation.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from nodice.gate.result import Finding
from nodice.gate.static.contracts import Contract, contract_for, parse_contract_file, shipped_contracts
from nodice.gate.static.dataflow import Interp
from nodice.gate.static.native import analyze_native
from nodice.gate.static.program import Analysis
from nodice.gate.static.project import embedded_sources, native_file_sources, referenced_native_files
from nodice.gate.static.report import Collector, render_json, render_text
from nodice.gate.static.rules import MECHANISMS, RULES, Rule
from nodice.gate.static.sources import entry_signature
from nodice.gate.static.values import V
from nodice.tasks.base import Task

__all__ = [
    "MECHANISMS",
    "RULES",
    "Contract",
    "Rule",
    "contract_for",
    "parse_contract_file",
    "render_json",
    "render_text",
    "run_static",
    "shipped_contracts",
]


def _entry_args(an: Analysis, fn: ast.FunctionDef | ast.AsyncFunctionDef, interp: Interp) -> list[V]:
    """Abstract values of the task's arguments, bound to the candidate's own parameter names."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    sig = an.signature
    out: list[V] = []
    for i, task_param in enumerate(sig.params):
        own = names[i] if i < len(names) else task_param
        rank = sig.ranks.get(task_param)
        b = sig.batch_args.get(task_param)
        if b is not None:
            prov = (interp.step(fn, f"{own}: {b.note}"),)
            out.append(
                V(
                    kind="tensor",
                    batch=prov,
                    baxis=b.axis,
                    rank=rank,
                    ctx=sig.context_axes.get(task_param, ()),
                )
            )
        elif rank is not None:
            out.append(V(kind="tensor", rank=rank))
        else:
            out.append(V())
    return out


def run_static(
    path: Path,
    task: Task,
    contracts: list[Path] | None = None,
    entry: str = "kernel",
) -> tuple[list[Finding], list[Finding]]:
    """(violations, unresolved) for the candidate file and its sibling helper modules / native sources.

    Raises :class:`nodice.errors.ContractError` for a bad contract file; never raises for a bad candidate
    (a file that does not parse has nothing to analyse: the loader reports it).
    """
    path = Path(path)
    contract = contract_for(task.name, task.family, contracts or [])
    collector = Collector()
    # abspath, not resolve(): a symlink-resolving walk costs more than the analysis of a small file.
    folder = Path(os.path.abspath(path)).parent
    an = Analysis(contract, entry_signature(task.signature, contract), folder, collector)
    mod = an.module(path, str(path), is_candidate=True)
    if mod is None:
        return [], []
    entry_v = mod.env.get(entry)
    interp = Interp(an, mod, {})
    call = ast.Call(func=ast.Name(entry, ast.Load()), args=[], keywords=[])
    node = _entry_def(mod.tree, entry)
    ast.copy_location(call, node or mod.tree.body[0] if mod.tree.body else ast.Pass(lineno=1, col_offset=0))
    if entry_v is not None and entry_v.kind == "func" and isinstance(entry_v.ref.node, ast.FunctionDef):
        interp.call_function(entry_v.ref, _entry_args(an, entry_v.ref.node, interp), {}, call)
    elif entry_v is not None and entry_v.kind in ("instance", "partial", "choice", "func"):
        target = interp.instance_attr(entry_v, "__call__") if entry_v.kind == "instance" else entry_v
        fn = getattr(getattr(target, "ref", None), "node", None)
        if target is not None and isinstance(fn, ast.FunctionDef):
            interp.dispatch(
                target, _entry_args(an, fn, interp)[1 if entry_v.kind == "instance" else 0 :], {}, call
            )
    elif entry_v is None or entry_v.opaque:
        collector.add(
            "opaque_dispatch",
            str(path),
            1,
            "dispatch",
            f"the entry point '{entry}' is not defined where the analyzer can see it",
            [],
        )
    modules = [m for m in an.modules.values() if m is not None]
    natives = [src for m in modules for src in embedded_sources(m.tree, m.source, m.display)]
    natives += native_file_sources(
        referenced_native_files([m.source for m in modules], path, an.listing()), path
    )
    for src in natives:
        analyze_native(src, contract, collector)
    return collector.result()


def _entry_def(tree: ast.Module, entry: str) -> ast.stmt | None:
    for s in tree.body:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == entry:
            return s
    return None
