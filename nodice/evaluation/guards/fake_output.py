"""Rule ``fake-output``: the output must be real, materialised memory the kernel wrote.

Tensor subclasses (lazy or fake tensors that compute on access or compare equal
to anything), meta tensors, non-strided layouts, conjugate/negative views,
non-contiguous or expanded views, and outputs that alias an input or each other
are all ways to return something that is not the computed result.
"""

from __future__ import annotations

from typing import Any

import torch

RULE = "fake-output"
DESCRIPTION = "returns a lazy, fake, aliased or non-materialised tensor instead of a computed one"


def _storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    start = storage.data_ptr()
    return (start, start + storage.nbytes()) if storage.nbytes() else None


def _overlap(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


def fake_tensor_reason(out: Any, names: tuple[str, ...]) -> str | None:
    """A one-line reason when an output only pretends to be a tensor (subclass, meta, lazy view)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for i, o in enumerate(outs):
        name = names[i] if i < len(names) else f"output {i}"
        if not isinstance(o, torch.Tensor):
            continue  # a wrong type is the gate's "bad output", not a cheat
        if type(o) is not torch.Tensor and not isinstance(o, torch.nn.Parameter):
            return f"{name} is a {type(o).__qualname__} (a torch.Tensor subclass)"
        if o.device.type == "meta":
            return f"{name} is a meta tensor (no data)"
        if o.layout != torch.strided:
            return f"{name} has layout {o.layout}"
        if o.is_conj() or o.is_neg():
            return f"{name} is a lazy conjugate/negative view"
    return None


def storage_reason(out: Any, args: tuple[Any, ...], names: tuple[str, ...]) -> str | None:
    """A one-line reason when correctly shaped outputs are views: strided, aliasing an input or each other."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    spans: list[tuple[str, tuple[int, int] | None]] = []
    for i, o in enumerate(outs):
        name = names[i] if i < len(names) else f"output {i}"
        if not isinstance(o, torch.Tensor):
            continue
        if not o.is_contiguous():
            return f"{name} is a non-contiguous view (strides {tuple(o.stride())})"
        spans.append((name, _storage_span(o)))
    inputs = [(j, _storage_span(a)) for j, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for name, span in spans:
        for j, ispan in inputs:
            if _overlap(span, ispan):
                return f"{name} aliases input argument {j} (the kernel returned or wrote into its input)"
    for k, (name, span) in enumerate(spans):
        for other, ospan in spans[k + 1 :]:
            if _overlap(span, ospan):
                return f"{name} and {other} share memory"
    return None


def inspect_outputs(out: Any, args: tuple[Any, ...], names: tuple[str, ...]) -> str | None:
    """A one-line reason when ``out`` is not a set of fresh, dense, plain tensors; else ``None``."""
    return fake_tensor_reason(out, names) or storage_reason(out, args, names)
