"""Named library baselines of every task, timed in the same run as the candidate and audited for BI.

One module per task family holds the baselines a kernel engineer compares
against, each configured the way a server runs it (the ``note`` says how):
torch's own ops (``F.rms_norm``, cuBLAS through ``torch.mm``, SDPA pinned to
cuDNN or FlashAttention-2, ``torch._grouped_mm``, a per-request-seeded
sampler) and the optional libraries (Liger, FlashInfer, fla, flash-attn-4, quack).

:func:`baselines_for` lists what applies on a device without importing any
optional package; :func:`load_baselines` imports them and reports each one
that cannot load with its one-line reason, so a table never loses a column
silently. :func:`audit_baseline` runs the gate's dynamic BI stage on one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any

import torch

from nodice.measuring.baselines import (
    attention_decode,
    attention_prefill,
    attention_varlen,
    dsa,
    gdn,
    gemm,
    kda,
    mla_decode,
    moe,
    norms,
    reference,
    sampling,
)
from nodice.measuring.baselines.audit import BaselineAudit, audit_baseline
from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, Prepared
from nodice.references import is_reference_task

__all__ = [
    "Baseline",
    "BaselineAudit",
    "BaselineUnavailable",
    "Prepared",
    "audit_baseline",
    "baselines_for",
    "find_baseline",
    "load_baselines",
    "provider_versions",
]

_CATALOG: dict[str, tuple[Baseline, ...]] = {
    **norms.BASELINES,
    **gemm.BASELINES,
    **attention_prefill.BASELINES,
    **attention_decode.BASELINES,
    **attention_varlen.BASELINES,
    **dsa.BASELINES,
    **mla_decode.BASELINES,
    **moe.BASELINES,
    **gdn.BASELINES,
    **kda.BASELINES,
    **sampling.BASELINES,
}


def baselines_for(task_name: str, device: torch.device) -> list[Baseline]:
    """Every baseline of ``task_name`` that applies on ``device``'s type, available here or not."""
    return [b for b in _listed(task_name) if device.type in b.devices]


def _listed(task_name: str) -> tuple[Baseline, ...]:
    """A catalog task's baselines; a reference task's is its own ``Model``."""
    return reference.baselines(task_name) if is_reference_task(task_name) else _CATALOG.get(task_name, ())


def find_baseline(name: str, device: torch.device, task_name: str | None = None) -> tuple[str, Baseline]:
    """The task and baseline called ``name`` on ``device`` (within ``task_name`` when given)."""
    tasks = [task_name] if task_name else list(_CATALOG)
    for t in tasks:
        for b in _listed(t):
            if b.name != name:
                continue
            if device.type not in b.devices:
                raise BaselineUnavailable(f"{name!r} runs on {', '.join(b.devices)}, not {device.type}")
            return t, b
    known = sorted({b.name for t in tasks for b in baselines_for(t, device)})
    where = f"task {task_name}" if task_name else "any task"
    raise BaselineUnavailable(
        f"no baseline {name!r} for {where} on {device.type} (known: {', '.join(known)})"
    )


def load_baselines(
    task_name: str, device: torch.device
) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    """(name → implementation for those that load, name → one-line reason for those that do not)."""
    loaded: dict[str, Callable[..., Any]] = {}
    missing: dict[str, str] = {}
    for b in baselines_for(task_name, device):
        try:
            loaded[b.name] = b.load()
        except BaselineUnavailable as exc:
            missing[b.name] = str(exc)
        except Exception as exc:  # a loader that broke: reported like a missing package, never dropped
            missing[b.name] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
    return loaded, missing


def provider_versions(baselines: Iterable[Baseline]) -> dict[str, str]:
    """Installed version of each baseline's provider distribution, ``"missing"`` when absent."""
    out: dict[str, str] = {}
    for b in baselines:
        if b.provider not in out:
            try:
                out[b.provider] = metadata.version(b.provider)
            except metadata.PackageNotFoundError:
                out[b.provider] = "missing"
    return out
