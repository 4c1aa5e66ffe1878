"""Kimi delta attention baselines: fla's KDA kernels (Triton), chunked and fused recurrent.

The task's layout is fla's: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``,
``g [B, T, H, K]`` (one natural-log decay per key channel), ``beta [B, T, H]``
already through its sigmoid; g and beta stay fp32, which fla's kernels load as
they are. q and k arrive L2-normalised and the gate computed, so fla's
in-kernel normalisation, gate and sigmoid stay off. ``chunk_kda`` runs with
fla's default chunk (64); ``fused_recurrent_kda`` is the token-by-token kernel
serving stacks use for decode. fla routes ``chunk_kda`` to the FlashKDA
CUTLASS backend when that package is installed; ``FLA_FLASH_KDA=0`` (set
unless the environment says otherwise) keeps the baseline on fla's own Triton
kernels.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.spec import Baseline, require

FLA = "fla-core"


def _load(op: str) -> Callable[..., Any]:
    os.environ.setdefault("FLA_FLASH_KDA", "0")
    fn = getattr(require("fla.ops.kda", FLA), op)

    def run(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        scale: float,
    ) -> torch.Tensor:
        with torch.no_grad():
            o, _ = fn(
                q, k, v, g, beta, scale=float(scale), output_final_state=False, use_qk_l2norm_in_kernel=False
            )
        out: torch.Tensor = o
        return out

    run.__name__ = op
    return run


def load_fla_chunk() -> Callable[..., Any]:
    return _load("chunk_kda")


def load_fla_fused_recurrent() -> Callable[..., Any]:
    return _load("fused_recurrent_kda")


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "kda": (
        Baseline(
            "fla chunk_kda",
            load_fla_chunk,
            FLA,
            note="fla.ops.kda.chunk_kda, chunk 64, [B,T,H,D] layout, fp32 per-channel g, FLA_FLASH_KDA=0",
        ),
        Baseline(
            "fla fused_recurrent_kda",
            load_fla_fused_recurrent,
            FLA,
            note="fla.ops.kda.fused_recurrent_kda, token by token, [B,T,H,D] layout, fp32 per-channel g",
        ),
    ),
}
