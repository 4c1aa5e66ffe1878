"""Rule ``fake-output``: the output must be real, materialised memory the kernel wrote.

Tensor subclasses (lazy or fake tensors that compute on access or compare equal
to anything), meta tensors, non-strided layouts, lazy conjugate/negative views,
views whose elements overlap (a stride-0 ``expand`` makes one stored row stand
for a whole batch), and outputs that share elements with an input or with each
other are all ways to return something that is not the computed result. Each
reason names what is shared, so the verdict rests on the memory itself.

A view that is merely strided (a transpose, a slice of a larger buffer) holds
every value in its own place: that is no cheat, but it breaks the task's
contract that outputs are contiguous, which ``nodice.gate.execute.check_layout``
reports as a bad output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

RULE = "fake-output"
DESCRIPTION = "returns a lazy, fake, overlapping or aliased tensor instead of a computed one"

# Above this many elements, an odd layout that strides alone cannot prove disjoint is not enumerated.
_EXACT_OVERLAP_LIMIT = 1 << 22


def _names(outs: tuple[Any, ...] | list[Any], names: tuple[str, ...]) -> list[str]:
    return [names[i] if i < len(names) else f"output {i}" for i in range(len(outs))]


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def fake_tensor_reason(out: Any, names: tuple[str, ...]) -> str | None:
    """A one-line reason when an output only pretends to be a tensor (subclass, meta, lazy view)."""
    outs = _as_tuple(out)
    for name, o in zip(_names(outs, names), outs, strict=True):
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


def overlaps_itself(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` are one place in memory."""
    dims = sorted((stride, size) for stride, size in zip(t.stride(), t.shape, strict=True) if size > 1)
    reach = 0  # how far, in elements, the dims sorted so far reach from the first element
    for stride, size in dims:
        if stride == 0:
            return True
        if stride <= reach:
            break  # interleaved strides: disjoint or not, only the offsets can tell
        reach += (size - 1) * stride
    else:
        return False
    if t.numel() > _EXACT_OVERLAP_LIMIT:
        return False
    offsets = torch.zeros(1, dtype=torch.int64)
    for stride, size in dims:
        offsets = (offsets[:, None] + torch.arange(size, dtype=torch.int64) * stride).reshape(-1)
    return int(offsets.unique().numel()) < int(offsets.numel())


def overlap_reason(out: Any, names: tuple[str, ...]) -> str | None:
    """A one-line reason when an output's elements overlap: fewer values stored than the shape claims."""
    outs = _as_tuple(out)
    for name, o in zip(_names(outs, names), outs, strict=True):
        if isinstance(o, torch.Tensor) and overlaps_itself(o):
            return (
                f"{name} is a view whose elements overlap in memory (shape {tuple(o.shape)}, "
                f"strides {tuple(o.stride())}): one stored value stands for several outputs"
            )
    return None


def _extent(t: torch.Tensor) -> tuple[int, int] | None:
    """The bytes from the view's first element to just past its last (the storage beyond is not its)."""
    if t.numel() == 0:
        return None
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    start = t.data_ptr()
    return start, start + (last + 1) * t.element_size()


def _overlap(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


def alias_reason(
    out: Any,
    args: tuple[Any, ...],
    names: tuple[str, ...],
    label: Callable[[int], str] = lambda j: f"input argument {j}",
) -> str | None:
    """A one-line reason when an output shares memory with an input or with another output.

    Meant for contiguous outputs, whose extent is exactly their elements; ``label`` names an input.
    """
    outs = _as_tuple(out)
    named = zip(_names(outs, names), outs, strict=True)
    spans = [(n, _extent(o)) for n, o in named if isinstance(o, torch.Tensor)]
    inputs = [(j, _extent(a)) for j, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for name, span in spans:
        for j, ispan in inputs:
            if _overlap(span, ispan):
                return (
                    f"{name} aliases {label(j)} (the kernel returned or wrote into its input, as an "
                    "in-place op does: every call must return new tensors, since one input is fed to "
                    "many calls; allocate the output)"
                )
    for k, (name, span) in enumerate(spans):
        for other, ospan in spans[k + 1 :]:
            if _overlap(span, ospan):
                return f"{name} and {other} share memory"
    return None


def inspect_outputs(out: Any, args: tuple[Any, ...], names: tuple[str, ...]) -> str | None:
    """The first reason ``out`` is not a set of real, separate tensors; else ``None`` (layout aside)."""
    return fake_tensor_reason(out, names) or overlap_reason(out, names) or alias_reason(out, args, names)
