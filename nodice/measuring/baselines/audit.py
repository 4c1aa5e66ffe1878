"""BI audit of a library implementation: the gate's dynamic stage, over the task's dtype and its probe dtypes.

A library has no source the static stage could read, so its verdict comes
from running it: the target sample alone, then inside batches of other sizes,
batchmates and positions, compared bitwise. The task's own dtype is always
checked; a probe dtype (fp32 on GPU, where bf16 rounding hides most
reduction-order changes) is checked only if the library accepts it: one that
rejects it (cuDNN SDPA, FlashInfer in fp32) is skipped and the detail says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from nodice.errors import NodiceError
from nodice.tasks.base import Task

AuditVerdict = Literal["pass", "bi_violation", "error"]


@dataclass(frozen=True)
class BaselineAudit:
    verdict: AuditVerdict
    # One line: the first mismatch, the error, or how much was checked (and what was skipped).
    detail: str
    # The dtypes dynamic validation ran in, e.g. ("bfloat16", "float32").
    dtypes: tuple[str, ...]
    # The context (and dtype) of the first mismatch, empty otherwise.
    context: str = ""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, NodiceError):
        return exc.line()
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:200]


def rejected_dtype(
    task: Task, impl: Callable[..., Any], device: torch.device, dtype: torch.dtype, seed: int
) -> str:
    """Why ``impl`` does not run one sample of ``task`` in ``dtype`` ("" when it does)."""
    declared = getattr(impl, "dtypes", None)
    if declared is not None and dtype not in declared:
        return f"the library takes {', '.join(dtype_name(d) for d in declared)} only"
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, device, dtype)
    args = task.compose(problem, task.samples(problem, gen, 1), gen)
    try:
        impl(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:
        return _one_line(exc)
    return ""


def audit_dtypes(task: Task, device: torch.device) -> list[torch.dtype]:
    """The dtypes a baseline is audited in on ``device``: the task's own, then its GPU probes.

    On CPU a library baseline is torch's own CPU code, not a kernel under Triton's interpreter,
    and the CPU audits exist to exercise the audit itself: they stay in the task's dtype (the
    fp16 probe is for candidate kernels).
    """
    probes = task.probe_dtypes(device) if device.type == "cuda" else []
    return list(dict.fromkeys([task.dtype_for(device), *probes]))


@dataclass(frozen=True)
class DtypeAudit:
    """The audit in one dtype: ``skipped`` when the library does not take a probe dtype."""

    dtype: str
    verdict: Literal["pass", "bi_violation", "error", "skipped"]
    # The mismatch, the error or why it was skipped; empty on a pass.
    detail: str = ""
    contexts: int = 0
    context: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "verdict": self.verdict,
            "detail": self.detail,
            "contexts": self.contexts,
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DtypeAudit:
        return cls(str(d["dtype"]), d["verdict"], str(d.get("detail", "")), int(d.get("contexts", 0)),
                   str(d.get("context", "")))  # fmt: skip


def audit_dtype(
    task: Task,
    impl: Callable[..., Any],
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    *,
    name: str = "baseline",
    probe: bool = False,
) -> DtypeAudit:
    """Dynamic BI validation of ``impl`` in one dtype; a ``probe`` dtype the library rejects is skipped."""
    from nodice.gate.dynamic import validate

    try:
        if probe:
            reason = rejected_dtype(task, impl, device, dtype, seed)
            if reason:
                return DtypeAudit(dtype_name(dtype), "skipped", f"not accepted: {reason}")
        report = validate(task, impl, Path(f"<{name}>"), device, dtype, seed)
    except Exception as exc:
        return DtypeAudit(dtype_name(dtype), "error", _one_line(exc))
    if report.mismatch is not None:
        where = f"{report.mismatch.context.get('name')} ({dtype_name(dtype)})"
        return DtypeAudit(
            dtype_name(dtype), "bi_violation", report.mismatch.line(), report.contexts_run, where
        )
    return DtypeAudit(dtype_name(dtype), "pass", "", report.contexts_run)


def combine_audits(parts: Iterable[DtypeAudit], device_type: str) -> BaselineAudit:
    """One verdict from the per-dtype audits, taken in audit order: the first error or mismatch decides."""
    checked: list[str] = []
    skipped: list[str] = []
    contexts = 0
    for part in parts:
        if part.verdict == "skipped":
            skipped.append(f"{part.dtype} {part.detail}")
            continue
        if part.verdict == "error":
            return BaselineAudit("error", part.detail, tuple(checked))
        checked.append(part.dtype)
        contexts += part.contexts
        if part.verdict == "bi_violation":
            # Say the dtype it failed in, and those it passed in before (a library may be invariant
            # in the model's dtype and not in a probe dtype).
            passed = f" ({', '.join(checked[:-1])} passed)" if len(checked) > 1 else ""
            detail = f"in {part.dtype}{passed}: {part.detail}"
            return BaselineAudit("bi_violation", detail, tuple(checked), part.context)
    detail = f"{contexts} contexts on {device_type} in {', '.join(checked)}"
    if skipped:
        detail += "; skipped " + "; ".join(skipped)
    return BaselineAudit("pass", detail, tuple(checked))


def audit_baseline(
    task: Task | str,
    impl: Callable[..., Any],
    device: torch.device,
    seed: int,
    *,
    name: str = "baseline",
    dtypes: Iterable[torch.dtype] | None = None,
) -> BaselineAudit:
    """Dynamic BI validation of ``impl`` over ``dtypes`` (default: the task's dtype, then its probes)."""
    from nodice.tasks import get_task

    try:
        t = get_task(task) if isinstance(task, str) else task
        wanted = list(dict.fromkeys(dtypes)) if dtypes is not None else audit_dtypes(t, device)
    except Exception as exc:
        return BaselineAudit("error", _one_line(exc), ())
    parts: list[DtypeAudit] = []
    for i, dtype in enumerate(wanted):
        part = audit_dtype(t, impl, device, dtype, seed, name=name, probe=i > 0)
        parts.append(part)
        if part.verdict in ("error", "bi_violation"):
            break
    return combine_audits(parts, device.type)
