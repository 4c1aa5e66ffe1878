"""`nodice audit`: BI verdicts for existing kernels — files, folders and installed callables.

A file or folder is judged by the full gate (each file in its own worker). An
installed callable such as ``torch.nn.functional.scaled_dot_product_attention``
is adapted to a task's signature and validated dynamically: library code has no
source to analyse, so its verdict comes from running it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nodice.errors import NodiceError
from nodice.gate.result import EXIT_ERROR, EXIT_PASS, EXIT_REJECTED


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
    from nodice.gate.dynamic import validate
    from nodice.gate.runtime import resolve_device
    from nodice.tasks import get_task

    task_name, adapt = ADAPTERS.get(name, (task or "", _plain))
    task_name = task or task_name
    if not task_name:
        return AuditRow(name, "", "error", "", "unknown calling convention: pass --task")
    try:
        fn = adapt(resolve_callable(name))
        t = get_task(task_name)
        dev = resolve_device(device)
        dtypes = [t.dtype_for(dev), *t.probe_dtypes(dev)]
        for dtype in dict.fromkeys(dtypes):
            rep = validate(t, fn, Path(name), dev, dtype, seed)
            if rep.mismatch is not None:
                m = rep.mismatch
                where = f"{m.context.get('name')} ({str(dtype).removeprefix('torch.')})"
                return AuditRow(name, task_name, "bi_violation", f"dynamic: {where}", m.line())
    except NodiceError as exc:
        return AuditRow(name, task_name, "error", "", exc.line())
    except Exception as exc:
        return AuditRow(name, task_name, "error", "", f"{type(exc).__name__}: {exc}"[:200])
    return AuditRow(name, task_name, "pass", "", f"{rep.contexts_run} contexts on {dev.type}")


def _task_of(path: Path, task: str | None) -> str | None:
    from nodice.tasks import CATALOG

    if task:
        return task
    for parent in path.resolve().parents:
        if parent.name in CATALOG:
            return parent.name
    return None


def audit_file(path: Path, task: str | None, device: str | None, seed: int, timeout: float) -> AuditRow:
    from nodice.evaluation.sandbox import check_isolated

    task_name = _task_of(path, task)
    if task_name is None:
        return AuditRow(str(path), "", "error", "", "cannot tell the task: pass --task")
    r = check_isolated(timeout_s=timeout, path=str(path), task=task_name, device=device, seed=seed)
    mechanism = ""
    if r.findings and r.findings[0].severity == "violation":
        f = r.findings[0]
        mechanism = f"{f.mechanism} ({f.protected}) at line {f.line}"
    elif r.mismatch is not None:
        mechanism = f"dynamic: {r.mismatch.context.get('name')}"
    return AuditRow(str(path), task_name, r.verdict, mechanism, r.reason or r.error or "")


def expand(targets: list[str]) -> list[str]:
    out: list[str] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            out += [str(f) for f in sorted(p.rglob("*.py")) if not f.name.startswith("_")]
        else:
            out.append(t)
    return out


def register(app: typer.Typer) -> None:
    @app.command()
    def audit(
        targets: Annotated[list[str], typer.Argument(help="files, folders or dotted callables")],
        task: Annotated[str | None, typer.Option("--task", "-t", help="task of every target")] = None,
        device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available)")] = None,
        seed: Annotated[int, typer.Option(help="random seed")] = 0,
        timeout: Annotated[float, typer.Option(help="per-file wall-clock limit (s)")] = 600.0,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON rows")] = False,
    ) -> None:
        """BI audit of existing kernels: a table of verdicts and mechanisms."""
        rows: list[AuditRow] = []
        for target in expand(targets):
            looks_like_file = target.endswith(".py") or "/" in target or Path(target).exists()
            if looks_like_file:
                rows.append(audit_file(Path(target), task, device, seed, timeout))
            else:
                rows.append(audit_callable(target, task, device, seed))
        if as_json:
            print(json.dumps([asdict(r) for r in rows], indent=2))
        else:
            table = Table(title="nodice audit")
            for col in ("target", "task", "verdict", "mechanism", "detail"):
                table.add_column(col, overflow="fold")
            for r in rows:
                table.add_row(r.target, r.task, r.verdict, r.mechanism, r.detail[:120])
            Console().print(table)
        verdicts = {r.verdict for r in rows}
        if "error" in verdicts:
            raise typer.Exit(EXIT_ERROR)
        raise typer.Exit(EXIT_REJECTED if verdicts - {"pass"} else EXIT_PASS)
