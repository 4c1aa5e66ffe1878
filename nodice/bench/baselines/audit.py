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
    from nodice.gate.dynamic import validate
    from nodice.tasks import get_task

    checked: list[str] = []
    skipped: list[str] = []
    contexts = 0
    try:
        t = get_task(task) if isinstance(task, str) else task
        wanted = list(dtypes) if dtypes is not None else [t.dtype_for(device), *t.probe_dtypes(device)]
        for i, dtype in enumerate(dict.fromkeys(wanted)):
            if i > 0:
                reason = rejected_dtype(t, impl, device, dtype, seed)
                if reason:
                    skipped.append(f"{dtype_name(dtype)} not accepted: {reason}")
                    continue
            report = validate(t, impl, Path(f"<{name}>"), device, dtype, seed)
            checked.append(dtype_name(dtype))
            contexts += report.contexts_run
            if report.mismatch is not None:
                where = f"{report.mismatch.context.get('name')} ({dtype_name(dtype)})"
                return BaselineAudit("bi_violation", report.mismatch.line(), tuple(checked), where)
    except Exception as exc:
        return BaselineAudit("error", _one_line(exc), tuple(checked))
    detail = f"{contexts} contexts on {device.type} in {', '.join(checked)}"
    if skipped:
        detail += "; skipped " + "; ".join(skipped)
    return BaselineAudit("pass", detail, tuple(checked))
