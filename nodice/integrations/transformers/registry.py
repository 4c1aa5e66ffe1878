"""transformers' registries that nodice joins: attention functions, a mask function, schedulers,
and its decode fast path for ``paged|nodice``."""

from __future__ import annotations

from typing import Any

_REGISTERED = False


def register() -> None:
    """Register nodice's attention functions, mask function and schedulers with transformers (idempotent)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    from nodice.integrations.transformers.attention import nodice_attention
    from nodice.integrations.transformers.batches import register_schedulers
    from nodice.integrations.transformers.paged import paged_nodice_attention

    AttentionInterface.register("nodice", nodice_attention)
    AttentionInterface.register("paged|nodice", paged_nodice_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register("nodice", sdpa_mask)
    register_schedulers()
    _keep_decode_fast_path()
    _REGISTERED = True


def _keep_decode_fast_path() -> None:
    """Let ``paged|nodice`` take transformers' decode fast path (a block table per request, no host
    lengths: the step it can capture as a CUDA graph). transformers offers that path to flash
    attention only and turns it off for every other implementation; for ``paged|nodice`` under one
    of nodice's recording schedulers (which send a prompt's one-token chunk down the varlen path) it
    is kept as configured. ``max_blocks_per_request=0`` still turns it off."""
    from transformers.generation.continuous_batching import initialization

    original = initialization.ensure_decode_fast_path_is_available
    if getattr(original, "_nodice", False):
        return

    def ensure(config: Any, cb_config: Any, user_requested: bool) -> None:
        if fast_decode(config, cb_config):
            return
        original(config, cb_config, user_requested)

    ensure._nodice = True  # type: ignore[attr-defined]
    initialization.ensure_decode_fast_path_is_available = ensure


def fast_decode(config: Any, cb_config: Any) -> bool:
    """Whether ``paged|nodice`` keeps transformers' decode fast path for this configuration."""
    from nodice.integrations.transformers.batches import recording

    return (
        getattr(config, "_attn_implementation", None) == "paged|nodice"
        and (cb_config.max_blocks_per_request or 0) > 0
        and recording(cb_config.scheduler_type)
    )
