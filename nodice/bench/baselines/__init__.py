"""Named baselines of each task, timed in the same run as the candidate.

A task may define ``baselines(device) -> {name: callable}`` itself; these are
the built-in ones for the catalog: the library implementations a kernel
engineer compares against (torch's fused RMSNorm, cuBLAS through ``torch.mm``,
cuDNN and flash SDPA).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.tasks.base import Task

Baseline = Callable[..., Any]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    summed = x + residual
    return F.rms_norm(summed, (summed.shape[-1],), weight, eps), summed


def _sdpa(backend: Any) -> Baseline:
    from torch.nn.attention import sdpa_kernel

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float) -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=q.shape[1] != k.shape[1]
            )

    return run


def _attention_prefill(device: torch.device) -> dict[str, Baseline]:
    from torch.nn.attention import SDPBackend

    if device.type != "cuda":
        return {"torch SDPA": _sdpa(SDPBackend.MATH)}
    return {"cuDNN SDPA": _sdpa(SDPBackend.CUDNN_ATTENTION), "flash SDPA": _sdpa(SDPBackend.FLASH_ATTENTION)}


_BUILTIN: dict[str, Callable[[torch.device], dict[str, Baseline]]] = {
    "rmsnorm": lambda d: {"torch F.rms_norm": _rms_norm},
    "add_rmsnorm": lambda d: {"torch add + F.rms_norm": _add_rms_norm},
    "gemm": lambda d: {("cuBLAS (torch.mm)" if d.type == "cuda" else "torch.mm"): torch.mm},
    "attention_prefill": _attention_prefill,
}


def baselines_for(task: Task, device: torch.device) -> dict[str, Baseline]:
    own = getattr(task, "baselines", None)
    if callable(own):
        found: dict[str, Baseline] = own(device)
        if found:
            return found
    make = _BUILTIN.get(task.name)
    return make(device) if make else {}
