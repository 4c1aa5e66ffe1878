"""Gated delta net baselines: fla's chunked gated delta rule (Triton) and FlashInfer's GDN prefill.

The task's layout is fla's: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``,
``g, beta [B, T, H]`` (sequence-major, not head-first), ``g`` the natural-log
decay and ``beta`` already through its sigmoid; both stay fp32, which fla's
kernels load as they are. q and k arrive L2-normalised, so fla's in-kernel
normalisation stays off. The chunk size is fla's default (64). fla can route
this op to an external FlashQLA backend when that package is installed;
``FLA_FLASH_QLA=0`` (set unless the environment says otherwise) keeps the
baseline on fla's own Triton kernels.

FlashInfer's ``chunk_gated_delta_rule`` (``flashinfer.gdn_prefill``) runs its
SM90 CuTe DSL kernel on Hopper (it needs nvidia-cutlass-dsl, which travels with
flash-attn-4). It takes the batch packed as variable-length sequences
(``[B·T, H, D]`` with ``cu_seqlens``) and the forget gate as ``alpha = exp(g)``:
the packing, the gate's ``exp`` and ``cu_seqlens`` are setup (``prepare``), as a
model computing ``alpha`` directly would have them. ``use_cp=False`` keeps the
one kernel: its default lets a heuristic switch to a context-parallel kernel
when sequences × heads are few for the SMs, a choice made from the batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.spec import (
    Baseline,
    BaselineUnavailable,
    Prepared,
    put_cutlass_dsl_on_path,
    require,
)

FLA = "fla-core"
FLASHINFER = "flashinfer-python"


def pack_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """The task's ``[B, T, H, D]`` batch as FlashInfer's packed sequences: q, k, v ``[B·T, H, D]``,
    ``alpha = exp(g)`` and beta ``[B·T, H]`` in fp32, and ``cu_seqlens = 0, T, 2T, …`` (int64)."""
    b, t = q.shape[:2]
    flat = [x.reshape(b * t, *x.shape[2:]).contiguous() for x in (q, k, v)]
    alpha = torch.exp(g.float()).reshape(b * t, -1).contiguous()
    gates = beta.float().reshape(b * t, -1).contiguous()
    cu_seqlens = torch.arange(b + 1, device=q.device, dtype=torch.int64) * t
    return (*flat, alpha, gates, cu_seqlens)


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


def load_flashinfer_gdn() -> Callable[..., Any]:
    put_cutlass_dsl_on_path()  # before FlashInfer's first import, which tries its CuTe DSL kernels once
    gdn_prefill = require("flashinfer.gdn_prefill", FLASHINFER)
    kernels = require("flashinfer.gdn_kernels", FLASHINFER)
    hopper = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
    if hopper and getattr(kernels, "chunk_gated_delta_rule_sm90", None) is None:
        raise BaselineUnavailable(
            f"{FLASHINFER}: its SM90 GDN prefill kernel did not import (it needs nvidia-cutlass-dsl)"
        )
    chunk_gated_delta_rule = gdn_prefill.chunk_gated_delta_rule

    def prepare(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        scale: float,
    ) -> Callable[[], torch.Tensor]:
        b, t, h, dv = v.shape
        fq, fk, fv, alpha, gates, cu_seqlens = pack_varlen(q, k, v, g, beta)

        def call() -> torch.Tensor:
            with torch.no_grad():
                o = chunk_gated_delta_rule(
                    fq, fk, fv, alpha, gates, scale=float(scale), cu_seqlens=cu_seqlens, use_cp=False
                )
            out: torch.Tensor = o.view(b, t, h, dv)
            return out

        return call

    return Prepared(prepare, "flashinfer_gdn", (torch.bfloat16, torch.float16))


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "gdn": (
        Baseline(
            "fla chunk_gated_delta_rule",
            load_fla_chunk,
            FLA,
            note="fla.ops.gated_delta_rule.chunk_gated_delta_rule, chunk 64, [B,T,H,D] layout, fp32 g/beta",
        ),
        Baseline(
            "FlashInfer GDN prefill",
            load_flashinfer_gdn,
            FLASHINFER,
            note=(
                "flashinfer.gdn_prefill.chunk_gated_delta_rule(use_cp=False): the SM90 CuTe DSL kernel on "
                "Hopper; the batch packed as B sequences of T, alpha = exp(g), in prepare"
            ),
        ),
    ),
}
