"""Prefill attention baselines: torch SDPA pinned to one backend, and flash-attn-4's CuTe forward.

SDPA is pinned with ``sdpa_kernel`` so that the table says which kernel ran
(cuDNN, FlashAttention-2 inside torch, or the math backend on CPU) instead of
whatever torch's dispatcher picked for that shape.

flash-attn-4 (``flash_attn.cute``) carries the FA3-class Hopper forward
(``FlashAttentionForwardSm90``) and the Blackwell one; ``num_splits=1`` is its
default and its batch-invariant setting (``num_splits < 1`` turns on a split
heuristic that looks at the batch). It wants ``[B, S, H, D]``: the transposes
are setup (``prepare``), and the output goes back as a ``[B, H, S, D]`` view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines import flashinfer_prefill
from nodice.measuring.baselines.spec import Baseline, Prepared, put_cutlass_dsl_on_path, require

FLASH_ATTN_4 = "flash-attn-4"


def sdpa(backend_name: str) -> Callable[[], Callable[..., Any]]:
    """A loader of SDPA pinned to ``SDPBackend.<backend_name>``."""

    def load() -> Callable[..., Any]:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)

        def run(
            q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
        ) -> torch.Tensor:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(
                    q, k, v, is_causal=bool(causal), scale=sm_scale, enable_gqa=q.shape[1] != k.shape[1]
                )

        return run

    return load


def to_sequence_major(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``[B, H, S, D]`` → contiguous ``[B, S, H, D]``, the layout flash-attn's functions take."""
    return tuple(t.transpose(1, 2).contiguous() for t in tensors)


def load_flash_attn_4() -> Callable[..., Any]:
    put_cutlass_dsl_on_path()
    flash_attn_func = require("flash_attn.cute", FLASH_ATTN_4).flash_attn_func

    def prepare(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
    ) -> Callable[[], torch.Tensor]:
        qs, ks, vs = to_sequence_major(q, k, v)

        def call() -> torch.Tensor:
            out, _ = flash_attn_func(qs, ks, vs, softmax_scale=sm_scale, causal=bool(causal), num_splits=1)
            o: torch.Tensor = out.transpose(1, 2)
            return o

        return call

    return Prepared(prepare, "flash_attn_4", (torch.bfloat16, torch.float16))


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "attention_prefill": (
        Baseline("cuDNN SDPA", sdpa("CUDNN_ATTENTION"), "torch", note="SDPBackend.CUDNN_ATTENTION"),
        Baseline(
            "flash SDPA",
            sdpa("FLASH_ATTENTION"),
            "torch",
            note="SDPBackend.FLASH_ATTENTION (FlashAttention-2 inside torch)",
        ),
        Baseline(
            "flash-attn-4 (CuTe)",
            load_flash_attn_4,
            FLASH_ATTN_4,
            note=(
                "flash_attn.cute.flash_attn_func, num_splits=1 (its batch-invariant setting; "
                "FlashAttentionForwardSm90 on Hopper); [B,S,H,D] transposes in prepare"
            ),
        ),
        *flashinfer_prefill.baselines("attention_prefill"),
        Baseline("torch SDPA", sdpa("MATH"), "torch", ("cpu",), "SDPBackend.MATH"),
    ),
}
