"""The gated kernels the transformers integration calls directly, and what each call did.

The projections, MLP and norms reach nodice through the batch-invariant mode's aten routes; the
attention and sampling calls that transformers makes through its own interfaces reach these
kernels instead: ``attention_prefill`` (a contiguous batch, as many keys as queries),
``attention_varlen`` (packed prefill chunks, keys aligned bottom-right), ``attention_decode``
(one generated token per request over the paged cache) and ``sampling``; ``moe`` for a model with
sparse MoE blocks (``moe.py``). Each is loaded only once the BI gate has passed it on the device,
like the mode's routes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from nodice.kernels.mode import GatedKernel, gated_kernel
from nodice.kernels.routes import ATTENTION_HEAD_DIMS

TASKS = ("attention_prefill", "attention_varlen", "attention_decode", "sampling")


@dataclass
class CallStats:
    """Calls one integration path routed to a nodice kernel, and those that fell back (the last reason)."""

    routed: int = 0
    fallbacks: int = 0
    last_fallback: str = ""

    def fell_back(self, reason: str) -> None:
        self.fallbacks += 1
        self.last_fallback = reason


@dataclass
class KernelSet:
    """The gated kernels on one device, and per-path call counts since ``enable``."""

    device: torch.device
    kernels: dict[str, GatedKernel]
    stats: dict[str, CallStats] = field(default_factory=dict)

    def count(self, path: str) -> CallStats:
        return self.stats.setdefault(path, CallStats())

    def fn(self, task: str) -> Callable[..., Any] | None:
        k = self.kernels.get(task)
        return k.fn if k is not None and k.usable else None

    def refuse(self, task: str, *tensors: torch.Tensor) -> str | None:
        """Why ``task``'s kernel cannot take these tensors, or ``None``."""
        k = self.kernels.get(task)
        if k is None or not k.usable:
            return f"{task}: {k.reason if k is not None else 'not loaded'}"
        first = tensors[0]
        if any(t.device.type != self.device.type for t in tensors):
            return f"a {first.device.type} tensor (the kernels run on {self.device.type})"
        dtype = str(first.dtype).removeprefix("torch.")
        if any(t.dtype != first.dtype for t in tensors):
            return "mixed dtypes"
        if dtype not in k.dtypes:
            return f"{dtype} ({task} validated by the gate here: {', '.join(k.dtypes)})"
        if task.startswith("attention") and first.dim() >= 2 and first.shape[-1] not in ATTENTION_HEAD_DIMS:
            return f"head dim {first.shape[-1]} (covered: {', '.join(map(str, ATTENTION_HEAD_DIMS))})"
        return None


def load_kernels(device: torch.device, *, verify: bool, cache: bool | str | Any) -> KernelSet:
    return KernelSet(device, {t: gated_kernel(t, device, verify=verify, cache=cache) for t in TASKS})


_LOADED: dict[str, KernelSet] = {}


def install(kernels: KernelSet) -> None:
    """Make ``kernels`` the set the attention and sampling paths use on its device."""
    _LOADED[str(kernels.device)] = kernels


def kernels_for(device: torch.device) -> KernelSet:
    """The installed set for ``device``; loaded (and gated, verdicts cached) on first use otherwise."""
    key = str(device)
    if key not in _LOADED:
        _LOADED[key] = load_kernels(device, verify=True, cache=True)
    return _LOADED[key]
