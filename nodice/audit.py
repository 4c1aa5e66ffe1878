"""`nodice audit`: BI verdicts for existing kernels — files, folders and installed callables.

A file or folder is judged by the full gate (each file in its own worker). An
installed callable such as ``torch.nn.functional.scaled_dot_product_attention``
is adapted to a task's signature and validated dynamically: library code has no
source to analyse, so its verdict comes from running it.

KernelBench-style artifacts are judged against their reference: ``--reference
REF.py`` for ``ModelNew`` files, and a file that carries its own ``Model``,
``get_inputs`` and ``get_init_inputs`` (a problem, or a solution written into
one) against itself. The gate first asks whether the operator gives each sample
an output of its own (:mod:`nodice.gate.applicability`); an artifact whose
operator couples its samples is ``not_applicable``, and the table's summary
counts the batch-applicable artifacts apart from the verdicts on them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import NodiceError

if TYPE_CHECKING:
    from nodice.measuring.baselines import BaselineAudit


@dataclass
class AuditRow:
    target: str
    task: str
    verdict: str
    mechanism: str
    detail: str


def _sdpa(fn: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(q: Any, k: Any, v: Any, causal: bool, sm_scale: float) -> Any:
        return fn(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=q.shape[1] != k.shape[1])

    return kernel


def _rms_norm(fn: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(x: Any, weight: Any, eps: float) -> Any:
        return fn(x, (x.shape[-1],), weight, eps)

    return kernel


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


# Library callables whose calling convention differs from the task's signature.
ADAPTERS: dict[str, tuple[str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = {
    "torch.nn.functional.scaled_dot_product_attention": ("attention_prefill", _sdpa),
    "torch.nn.functional.rms_norm": ("rmsnorm", _rms_norm),
    "torch.mm": ("gemm", _plain),
    "torch.matmul": ("gemm", _plain),
}


def resolve_callable(name: str) -> Callable[..., Any]:
    """``package.module.attr`` → the object, importing the longest module prefix that exists."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if callable(obj):
            return obj  # type: ignore[no-any-return]
        raise NodiceError(f"{name} is not callable")
    raise NodiceError(f"cannot import {name}")


def audit_callable(name: str, task: str | None, device: str | None, seed: int) -> AuditRow:
    from nodice.gate.runtime import resolve_device
    from nodice.measuring.baselines import audit_baseline
    from nodice.tasks import get_task

    task_name, adapt = ADAPTERS.get(name, (task or "", _plain))
    task_name = task or task_name
    if not task_name:
        # A name that does not import says so first; one that does needs the task it implements.
        try:
            resolve_callable(name)
        except NodiceError as exc:
            return AuditRow(name, "", "error", "", exc.line())
        return AuditRow(name, "", "error", "", "unknown calling convention: pass --task")
    try:
        fn = adapt(resolve_callable(name))
        t = get_task(task_name)
        dev = resolve_device(device)
    except NodiceError as exc:
        return AuditRow(name, task_name, "error", "", exc.line())
    return _row(name, task_name, audit_baseline(t, fn, dev, seed, name=name))


def audit_named_baseline(name: str, task: str | None, device: str | None, seed: int) -> AuditRow:
    """A library baseline of the benchmark (``--baseline "cuDNN SDPA"``), loaded as the benchmark loads it."""
    from nodice.gate.runtime import resolve_device
    from nodice.measuring.baselines import audit_baseline, find_baseline

    try:
        dev = resolve_device(device)
        task_name, baseline = find_baseline(name, dev, task)
        impl = baseline.load()
    except NodiceError as exc:
        return AuditRow(name, task or "", "error", "", exc.line())
    return _row(name, task_name, audit_baseline(task_name, impl, dev, seed, name=name))


def _row(target: str, task_name: str, audit: BaselineAudit) -> AuditRow:
    mechanism = f"dynamic: {audit.context}" if audit.verdict == "bi_violation" else ""
    return AuditRow(target, task_name, audit.verdict, mechanism, audit.detail)


REFERENCE_NAMES = ("Model", "get_inputs", "get_init_inputs")


def _defines(path: Path) -> set[str]:
    """Top-level names ``path`` defines (classes, functions, assignments); empty if it does not parse."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _task_of(path: Path, task: str | None) -> tuple[str | None, str]:
    """The task of ``path`` and its entry point: ``task``, the catalog folder it sits in, or itself
    as a KernelBench reference when it defines ``Model``, ``get_inputs`` and ``get_init_inputs``."""
    from nodice.references import REFERENCE_ENTRY, is_reference_task, reference_task_name
    from nodice.tasks import CATALOG

    if task:
        return task, REFERENCE_ENTRY if is_reference_task(task) else "kernel"
    for parent in path.resolve().parents:
        if parent.name in CATALOG:
            return parent.name, "kernel"
    names = _defines(path)
    if set(REFERENCE_NAMES) <= names:
        return reference_task_name(path), REFERENCE_ENTRY if REFERENCE_ENTRY in names else "Model"
    return None, ""


def audit_file(
    path: Path, task: str | None, device: str | None, seed: int, timeout: float | None
) -> AuditRow:
    from nodice.evaluation.sandbox import check_isolated

    if not path.is_file():
        why = "a folder, not a file" if path.is_dir() else "no such file"
        return AuditRow(str(path), task or "", "error", "", f"{why}: {path}")
    task_name, entry = _task_of(path, task)
    if task_name is None:
        return AuditRow(str(path), "", "error", "", "cannot tell the task: pass --task or --reference REF.py")
    r = check_isolated(
        timeout_s=timeout, path=str(path), task=task_name, entry=entry, device=device, seed=seed
    )
    mechanism = ""
    if r.findings and r.findings[0].severity == "violation":
        f = r.findings[0]
        mechanism = f"{f.mechanism} ({f.protected}) at line {f.line}"
    elif r.mismatch is not None:
        mechanism = f"dynamic: {r.mismatch.context.get('name')}"
    return AuditRow(str(path), task_name, r.verdict, mechanism, r.reason or r.error or "")


def summary(rows: list[AuditRow]) -> str:
    """One line: how many artifacts are batch-applicable, and the verdicts on those that are."""
    judged = [r for r in rows if r.verdict not in ("error", "not_applicable")]
    counts: dict[str, int] = {}
    for r in judged:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    coupled = sum(r.verdict == "not_applicable" for r in rows)
    errors = sum(r.verdict == "error" for r in rows)
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "none judged"
    tail = f"; {errors} could not be judged" if errors else ""
    return (
        f"batch-applicable: {len(judged)} of {len(rows) - errors} ({coupled} couple their samples); "
        f"on the applicable ones: {verdicts}{tail}"
    )


def expand(targets: list[str]) -> list[str]:
    out: list[str] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            out += [str(f) for f in sorted(p.rglob("*.py")) if not f.name.startswith("_")]
        else:
            out.append(t)
    return out
