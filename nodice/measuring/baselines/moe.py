"""MoE baselines: torch's grouped GEMM, one matmul per expert, and Liger's fused Triton MoE.

All three route the same way (softmax over experts in fp32, top-k,
renormalise) and run the SwiGLU experts on the ``w13`` layout of the task:
``w_gate_up[e]`` holds the gate rows ``[0, I)`` then the up rows ``[I, 2I)``.
The torch variants sort the routed (token, slot) pairs by expert, run the
experts on contiguous row blocks, and combine in fp32 with each token's
``top_k`` contributions summed in slot order (no atomics).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, require

LIGER = "liger-kernel"


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over experts in fp32, top-k, renormalise: (weights[T,k] fp32, expert ids[T,k])."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids


@dataclass(frozen=True)
class ExpertRows:
    """The routed (token, slot) pairs sorted by expert: row ``i`` of the sorted block is pair ``order[i]``."""

    order: torch.Tensor  # [T·k] flat (token·k + slot) index of each sorted row
    token: torch.Tensor  # [T·k] token of each sorted row
    counts: torch.Tensor  # [E] rows per expert
    ends: torch.Tensor  # [E] int32 cumulative row count: the grouped GEMM's offsets


def sort_by_expert(ids: torch.Tensor, experts: int) -> ExpertRows:
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=experts)
    return ExpertRows(order, order // ids.shape[1], counts, torch.cumsum(counts, 0).to(torch.int32))


def combine(sorted_out: torch.Tensor, rows: ExpertRows, weights: torch.Tensor) -> torch.Tensor:
    """Expert outputs back in (token, slot) order, weighted and summed over the slots in fp32."""
    tokens, top_k = weights.shape
    per_slot = torch.empty_like(sorted_out)
    per_slot[rows.order] = sorted_out
    weighted = per_slot.view(tokens, top_k, -1).float() * weights[..., None]
    return weighted.sum(dim=1)


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    inter = gate_up.shape[-1] // 2
    return F.silu(gate_up[:, :inter]) * gate_up[:, inter:]


# Runs the SwiGLU experts on the expert-sorted token rows: (rows, sorting, w_gate_up, w_down) -> [T·k, H].
Experts = Callable[[torch.Tensor, ExpertRows, torch.Tensor, torch.Tensor], torch.Tensor]


def sorted_moe(experts: Experts) -> Callable[..., torch.Tensor]:
    """The MoE layer around ``experts``: route, sort the routed rows by expert, run them, combine."""

    def run(
        x: torch.Tensor,
        router_logits: torch.Tensor,
        w_gate_up: torch.Tensor,
        w_down: torch.Tensor,
        top_k: int,
    ) -> torch.Tensor:
        weights, ids = route(router_logits, top_k)
        rows = sort_by_expert(ids, w_gate_up.shape[0])
        out = experts(x[rows.token], rows, w_gate_up, w_down)
        return combine(out, rows, weights).to(x.dtype)

    return run


def grouped_mm_experts(
    xs: torch.Tensor, rows: ExpertRows, w_gate_up: torch.Tensor, w_down: torch.Tensor
) -> torch.Tensor:
    # The weights' transposes are column-major [E, K, N] views, the layout the grouped GEMM takes.
    gate_up = torch._grouped_mm(xs, w_gate_up.transpose(1, 2), offs=rows.ends)
    return torch._grouped_mm(swiglu(gate_up), w_down.transpose(1, 2), offs=rows.ends)


def per_expert_experts(
    xs: torch.Tensor, rows: ExpertRows, w_gate_up: torch.Tensor, w_down: torch.Tensor
) -> torch.Tensor:
    out = torch.empty((xs.shape[0], w_down.shape[1]), dtype=xs.dtype, device=xs.device)
    start = 0
    for e, n in enumerate(rows.counts.tolist()):
        if n:
            block = slice(start, start + n)
            act = swiglu(torch.mm(xs[block], w_gate_up[e].t()))
            out[block] = torch.mm(act, w_down[e].t())
            start += n
    return out


def load_grouped_mm() -> Callable[..., Any]:
    if not hasattr(torch, "_grouped_mm"):
        raise BaselineUnavailable(f"torch {torch.__version__} has no torch._grouped_mm")
    return sorted_moe(grouped_mm_experts)


def load_liger_moe() -> Callable[..., Any]:
    # One pinned config per kernel, as a batch-invariant server runs it: Liger's autotuner would
    # compile and time every config for each new shape and dtype (minutes under the BI audit).
    os.environ.setdefault("LIGER_FUSED_MOE_AUTOTUNE", "0")
    fused = require("liger_kernel.ops.fused_moe", LIGER).LigerFusedMoEFunction

    def run(
        x: torch.Tensor,
        router_logits: torch.Tensor,
        w_gate_up: torch.Tensor,
        w_down: torch.Tensor,
        top_k: int,
    ) -> torch.Tensor:
        weights, ids = route(router_logits, top_k)
        with torch.no_grad():
            y: torch.Tensor = fused.apply(x, w_gate_up, w_down, ids.to(torch.int32), weights)
        return y

    return run


_ROUTING = "softmax/top-k/renormalise, sort and fp32 combine in torch"

BASELINES: dict[str, tuple[Baseline, ...]] = {
    "moe": (
        Baseline(
            "torch grouped_mm MoE",
            load_grouped_mm,
            "torch",
            ("cpu", "cuda"),
            f"torch._grouped_mm with per-expert offsets (CUTLASS grouped GEMM, bf16 on sm90+); {_ROUTING}",
        ),
        Baseline(
            "torch per-expert mm MoE",
            lambda: sorted_moe(per_expert_experts),
            "torch",
            ("cpu", "cuda"),
            f"one torch.mm per expert and projection (cuBLAS on CUDA); {_ROUTING}",
        ),
        Baseline(
            "Liger fused MoE (Triton)",
            load_liger_moe,
            LIGER,
            note=(
                "LigerFusedMoEFunction: Triton routing metadata, fused gather+gate/up GEMM+SwiGLU, "
                "down GEMM, weighted gather-sum; one pinned config per kernel (LIGER_FUSED_MOE_AUTOTUNE=0); "
                "routing in torch"
            ),
        ),
    ),
}
