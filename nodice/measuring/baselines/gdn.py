"""Gated delta net baseline: fla's chunked gated delta rule (Triton).

The task's layout is fla's: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``,
``g, beta [B, T, H]`` (sequence-major, not head-first), ``g`` the natural-log
decay and ``beta`` already through its sigmoid; both stay fp32, which fla's
kernels load as they are. q and k arrive L2-normalised, so fla's in-kernel
normalisation stays off. The chunk size is fla's default (64). fla can route
this op to an external FlashQLA backend when that package is installed;
``FLA_FLASH_QLA=0`` (set unless the environment says otherwise) keeps the
baseline on fla's own Triton kernels.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.spec import Baseline, require

FLA = "fla-core"


def load_fla_chunk() -> Callable[..., Any]:
    os.environ.setdefault("FLA_FLASH_QLA", "0")
    chunk_gated_delta_rule = require("fla.ops.gated_delta_rule", FLA).chunk_gated_delta_rule

    def run(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        scale: float,
    ) -> torch.Tensor:
        with torch.no_grad():
            o, _ = chunk_gated_delta_rule(
                q, k, v, g, beta, scale=float(scale), output_final_state=False, use_qk_l2norm_in_kernel=False
            )
        out: torch.Tensor = o
        return out

    return run


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "gdn": (
        Baseline(
            "fla chunk_gated_delta_rule",
            load_fla_chunk,
            FLA,
            note="fla.ops.gated_delta_rule.chunk_gated_delta_rule, chunk 64, [B,T,H,D] layout, fp32 g/beta",
        ),
    ),
}
