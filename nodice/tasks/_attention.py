"""What the attention tasks share: head layouts, problem variants, the fp32 reference, tolerances.

Head layout and causality are properties of a whole batch (one launch), so
they live in the :class:`~nodice.tasks.base.Problem`. A BI context that needs a
particular layout names it in ``BIContext.params["variant"]``; dynamic
validation builds a problem for it with ``task.problem(gen, device, dtype,
**variant)``. Without a variant (reference correctness), the layout is drawn
from the generator, so successive trials cover different layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from nodice.tasks.base import BIContext, Tolerance

# The streaming-multiprocessor count of an H100/H200: split heuristics compare
# batch·heads with it, so GPU contexts sit on both sides of it.
HOPPER_SM_COUNT = 132


@dataclass(frozen=True)
class HeadLayout:
    """Query and key/value head counts; MHA when equal, GQA (MQA when ``kv_heads == 1``) otherwise."""

    name: str
    q_heads: int
    kv_heads: int

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads


# CPU layouts are tiny because Triton's interpreter pays per program instance.
CPU_LAYOUTS = {
    "mha": HeadLayout("mha", 4, 4),
    "gqa": HeadLayout("gqa", 4, 2),
    "mqa": HeadLayout("mqa", 4, 1),
}
GPU_LAYOUTS = {
    "mha": HeadLayout("mha", 16, 16),
    "gqa": HeadLayout("gqa", 32, 8),
    "gqa4": HeadLayout("gqa4", 32, 4),
}

# Tolerances against the fp32 reference. bf16 attention rounds P to bf16 before
# P·V and the output once more; errors of ~1 % of |o| are normal for a correct
# flash kernel, an indexing or masking bug is off by O(1).
ATTENTION_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4),
    torch.float16: Tolerance(atol=4e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=3e-2, rtol=2e-2),
}


def layouts_for(device: torch.device) -> dict[str, HeadLayout]:
    return GPU_LAYOUTS if device.type == "cuda" else CPU_LAYOUTS


def randint(gen: torch.Generator, lo: int, hi: int) -> int:
    """Uniform integer in ``[lo, hi]`` drawn from ``gen``."""
    return int(torch.randint(lo, hi + 1, (1,), generator=gen).item())


def choose(gen: torch.Generator, options: list[Any]) -> Any:
    return options[randint(gen, 0, len(options) - 1)]


def pick_layout(gen: torch.Generator, device: torch.device, name: str | None) -> HeadLayout:
    table = layouts_for(device)
    if name is None:
        return table[choose(gen, sorted(table))]
    if name not in table:
        raise ValueError(f"unknown head layout '{name}' (known: {', '.join(sorted(table))})")
    return table[name]


def draw_sm_scale(gen: torch.Generator, head_dim: int) -> float:
    """``1/sqrt(D)`` times a factor in [0.75, 1.25]: a kernel that ignores ``sm_scale`` is wrong."""
    factor = 0.75 + 0.5 * float(torch.rand((1,), generator=gen).item())
    return factor / head_dim**0.5


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float) -> torch.Tensor:
    """fp32 attention of one sequence: q ``[Hq, Sq, D]``, k/v ``[Hkv, Sk, D]`` → ``[Hq, Sq, D]``.

    GQA repeats each key/value head for its ``Hq/Hkv`` query heads. The causal
    mask aligns the last query with the last key (for decode, Sq=1 sees all).
    """
    group = q.shape[0] // k.shape[0]
    kf = k.float().repeat_interleave(group, dim=0)
    vf = v.float().repeat_interleave(group, dim=0)
    scores = torch.matmul(q.float(), kf.transpose(-1, -2)) * sm_scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        rows = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        cols = torch.arange(sk, device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vf)


def positions(batch: int) -> list[tuple[int, str]]:
    """First, middle and last slot of a batch (fewer when the batch is small)."""
    slots = {0: "first", batch // 2: "middle", batch - 1: "last"}
    return sorted(slots.items())


def context(label: str, batch: int, position: int, variant: dict[str, Any], **params: Any) -> BIContext:
    """A context whose name says its variant, batch size and slot."""
    where = dict(positions(batch)).get(position, str(position))
    knobs = "".join(f",{k}={v}" for k, v in params.items())
    return BIContext(f"{label},batch={batch},{where}{knobs}", batch, position, {"variant": variant, **params})
