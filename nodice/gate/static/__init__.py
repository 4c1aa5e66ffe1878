"""Static BI analysis: contract-guided dataflow over the candidate's Python, Triton and native code.

``run_static(path, task)`` returns ``(violations, unresolved)``: violations
reject the candidate; unresolved findings (autotuning, opaque dispatch …) are
left to dynamic validation.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import nodice.gate.static.per_sample as per_sample
from nodice.gate.branches import CONFIRMABLE_RULES
from nodice.gate.result import Finding
from nodice.gate.static.branches import ASSIGNED_UNDER_BRANCH, RETURNED_UNDER_BRANCH
from nodice.gate.static.contracts import Contract, contract_for, parse_contract_file, shipped_contracts
from nodice.gate.static.dataflow import Interp
from nodice.gate.static.expressions import CHOSEN_TENSOR
from nodice.gate.static.module_state import MAX_STATE_PASSES, state_taint
from nodice.gate.static.native import analyze_native
from nodice.gate.static.program import Analysis, BudgetExceeded, ModuleInfo
from nodice.gate.static.project import embedded_sources, native_file_sources, referenced_native_files
from nodice.gate.static.report import Collector, render_json, render_text
from nodice.gate.static.rules import MECHANISMS, RULES, SPLIT_GUIDANCE, Rule
from nodice.gate.static.sources import entry_signature
from nodice.gate.static.torch_calls import PARTIAL_RESULT
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


def _entry_args(an: Analysis, fn: ast.FunctionDef, interp: Interp, skip_self: bool = False) -> list[V]:
    """Abstract values of the task's arguments, bound to the candidate's own parameter names."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args][1 if skip_self else 0 :]
    sig = an.signature
    out: list[V] = []
    for i, task_param in enumerate(sig.params):
        own = names[i] if i < len(names) else task_param
        rank = sig.ranks.get(task_param)
        b = sig.batch_args.get(task_param)
        if b is not None:
            prov = (interp.step(fn, f"{own}: {b.note}"),)
            ctx = sig.context_axes.get(task_param, ())
            mark = per_sample.ARGUMENT if not ctx else None
            out.append(V(kind="tensor", batch=prov, baxis=b.axis, rank=rank, ctx=ctx, extent=mark))
        elif rank is not None:
            out.append(V(kind="tensor", rank=rank))
        elif an.contract.is_batch_symbol(task_param):
            # A scalar the batch decides (the longest sequence of a ragged batch …).
            out.append(V(taint=(interp.step(fn, f"{own}: batch symbol '{task_param}' (contract)"),)))
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
    contract = contract_for(task.contracts_of or task.name, task.family, contracts or [])
    collector = Collector()
    # abspath, not resolve(): a symlink-resolving walk costs more than the analysis of a small file.
    folder = Path(os.path.abspath(path)).parent
    an = Analysis(contract, entry_signature(task.signature, contract, task.batch_symbol), folder, collector)
    try:
        mod = an.module(path, str(path), is_candidate=True)
        if mod is None:
            return [], []
        _analyze_with_state(an, mod, entry, str(path), task.init_values())
    except BudgetExceeded:
        collector.add(
            "opaque_dispatch", str(path), 1, "dispatch", "the analysis budget ran out on this file", []
        )
    except RecursionError:
        collector.add("opaque_dispatch", str(path), 1, "dispatch", "the code nests too deeply to analyse", [])
    modules = [m for m in an.modules.values() if m is not None]
    natives = [src for m in modules for src in embedded_sources(m.tree, m.source, m.display)]
    natives += native_file_sources(
        referenced_native_files([m.source for m in modules], path, an.listing()), path
    )
    for src in natives:
        analyze_native(src, contract, collector)
    violations, unresolved = collector.result()
    inherent = task.inherent_rules
    return [f for f in violations if f.rule not in inherent], [
        f for f in unresolved if f.rule not in inherent
    ]


def _analyze_with_state(
    an: Analysis, mod: ModuleInfo, entry: str, display: str, init: tuple[Any, ...] | None = None
) -> None:
    """Run the entry point, again while a run leaves more module-level state batch-dependent: a read
    that precedes the write (a launch reading what the previous call configured) sees it then."""
    before = state_taint(an)
    for _ in range(MAX_STATE_PASSES):
        _analyze_entry(an, mod, entry, display, init)
        after = state_taint(an)
        if after <= before:
            return
        before = after
        an.memo.clear()
        an.raise_memo.clear()
        an.steps = 0
    an.collector.add(
        "opaque_dispatch",
        display,
        1,
        "dispatch",
        f"module-level state still took batch values after {MAX_STATE_PASSES} passes",
        [],
    )


def _init_value(value: Any, depth: int = 0) -> V:
    """An argument the module is built with, as a constant where it is a plain Python value (an int,
    a float, a bool, a string, None, or a tuple or list of those); anything else is known only to be
    independent of the batch."""
    if value is None or type(value) in (int, float, bool, str):
        return V(const=value)
    if isinstance(value, (tuple, list)) and depth < 2 and len(value) <= 16:
        items = [_init_value(v, depth + 1) for v in value]
        return V(kind="seq", items=items)
    return V()


def _analyze_entry(
    an: Analysis, mod: ModuleInfo, entry: str, display: str, init: tuple[Any, ...] | None = None
) -> None:
    """Run the entry point with the task's arguments (a function, a callable object, a partial …)."""
    entry_v = mod.env.get(entry)
    interp = Interp(an, mod, {})
    node = _entry_def(mod.tree, entry)
    call = ast.Call(func=ast.Name(entry, ast.Load()), args=[], keywords=[])
    ast.copy_location(call, node or (mod.tree.body[0] if mod.tree.body else ast.Pass(lineno=1, col_offset=0)))
    if entry_v is None or entry_v.opaque:
        an.collector.add(
            "opaque_dispatch",
            display,
            1,
            "dispatch",
            f"the entry point '{entry}' is not defined where the analyzer can see it",
            [],
        )
        return
    if entry_v.kind == "class":
        # A module class (the KernelBench ``ModelNew``): built from the task's init inputs (their
        # values where they are plain constants: a reduction's ``dim``, a layer's sizes), else from
        # batch-independent unknowns, then its ``forward`` (or ``__call__``) runs on the task's arguments.
        if init is not None:
            init_args = [_init_value(v) for v in init]
        else:
            init_args = [V() for _ in range(_required_init_args(interp, entry_v))]
        entry_v = interp.instantiate(entry_v, init_args, {}, call)
        method = "forward" if interp.class_attr(entry_v.ref.cls, "forward") is not None else "__call__"
    else:
        method = "__call__"
    is_instance = entry_v.kind == "instance"
    target = interp.instance_attr(entry_v, method) if is_instance else entry_v
    fn = getattr(getattr(target, "ref", None), "node", None)
    if target is not None and isinstance(fn, ast.FunctionDef):
        result = interp.dispatch(target, _entry_args(an, fn, interp, skip_self=is_instance), {}, call)
        _output_values(an, mod, fn, result)


# Trace steps of a value that depends on the batch only through which computation ran.
_CHOICE_STEPS = (ASSIGNED_UNDER_BRANCH, RETURNED_UNDER_BRANCH, CHOSEN_TENSOR)


def _output_values(an: Analysis, mod: ModuleInfo, fn: ast.FunctionDef, result: V) -> None:
    """What the entry point returns: values computed from the batch (a statistic over it, its size
    in the arithmetic, positions in it) are what a sample's output must not depend on."""
    if any(f.severity == "violation" and f.rule not in CONFIRMABLE_RULES for f in an.collector.items):
        return  # a more specific finding explains the values already
    values = [result, *(result.items or [])] if result.kind == "seq" else [result]
    for v in values:
        trace = v.taint
        if trace is None or v.kind not in ("tensor", "seq"):
            continue
        if any(any(mark in step for mark in _CHOICE_STEPS) for step in trace):
            continue  # only which branch ran depends on the batch: the branch is judged as a choice
        split = any(PARTIAL_RESULT in step for step in trace)
        an.report(
            "batch_value_in_kernel_output",
            mod,
            fn,
            "OUTPUT",
            f"the values '{fn.name}' returns depend on the batch"
            + (": a per-sample axis is cut into batch-dependent pieces and reduced" if split else ""),
            trace,
            f"{mod.display}:{fn.lineno} {fn.name} returns them",
            mechanism="work_partitioning" if split else None,
            guidance=SPLIT_GUIDANCE if split else None,
        )
        return


def _required_init_args(interp: Interp, cls: V) -> int:
    """How many positional arguments the class's ``__init__`` requires (besides ``self``)."""
    init = interp.class_attr(cls.ref, "__init__")
    node = getattr(getattr(init, "ref", None), "node", None)
    if not isinstance(node, ast.FunctionDef):
        return 0
    a = node.args
    return max(0, len(a.posonlyargs + a.args) - 1 - len(a.defaults))


def _entry_def(tree: ast.Module, entry: str) -> ast.stmt | None:
    for s in tree.body:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == entry:
            return s
    return None
