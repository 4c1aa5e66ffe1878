"""transformers' registries that nodice joins: attention functions, a mask function, schedulers."""

from __future__ import annotations

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
    _REGISTERED = True
