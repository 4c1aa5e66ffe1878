"""Paged decode baselines: FlashInfer's batch decode pinned batch-invariant, and SDPA over gathered pages.

FlashInfer splits a long request's KV across CTAs and merges the partial
results; by default the split size is searched per batch, which makes a
request's reduction order depend on its batchmates. Two settings pin it
(what deterministic serving modes use): ``fixed_split_size`` (a split of
:data:`SPLIT_TOKENS` tokens, whatever the batch) and ``disable_split_kv``
(one chunk per request). ``fixed_split_size`` is only offered by the
tensor-core decode path, so both run ``use_tensor_cores=True`` on the FA2
backend. Converting the block table to FlashInfer's CSR page indices and
``plan()`` are per-step setup in a server: they run in ``prepare``.

The SDPA baseline is what a torch-only server does: gather each request's
pages, pad to the batch's longest request, mask the padding, one SDPA call.
GQA is folded into the query axis (the query heads of one kv head become
query rows), which keeps SDPA on its fused backends.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines.paged_kv import flashinfer_page_indices, gather_pages, key_mask
from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, Prepared, require

FLASHINFER = "flashinfer-python"
# Tokens per KV split, as in SGLang's deterministic FlashInfer decode; FlashInfer counts it in pages.
SPLIT_TOKENS = 2048
# FlashInfer's float workspace (split partial outputs and their LSEs), zeroed before first use: 256 MiB
# overflowed at 128 requests × 32K tokens in 2048-token splits on the H200.
WORKSPACE_BYTES = 1 << 30

# FlashInfer's attention kernels are instantiated for 16-bit inputs only.
HALF_DTYPES = (torch.bfloat16, torch.float16)


def split_pages(page_size: int) -> int:
    """FlashInfer's ``fixed_split_size`` (in pages) for a split of :data:`SPLIT_TOKENS` tokens."""
    return max(1, SPLIT_TOKENS // page_size)


def plan_accepts(cls: Any, name: str) -> bool:
    """Whether a FlashInfer wrapper's ``plan()`` takes the keyword ``name``."""
    for fn in (getattr(cls, "_plan_impl", None), getattr(cls, "plan", None)):
        if fn is not None and name in inspect.signature(fn).parameters:
            return True
    return False


def flashinfer_decode(split: str) -> Callable[[], Callable[..., Any]]:
    """A loader of FlashInfer's paged decode with ``split`` = ``"fixed"`` or ``"none"``."""

    def load() -> Callable[..., Any]:
        decode = require("flashinfer.decode", FLASHINFER)
        wrapper_cls = decode.BatchDecodeWithPagedKVCacheWrapper
        knob = "fixed_split_size" if split == "fixed" else "disable_split_kv"
        if not plan_accepts(wrapper_cls, knob):
            raise BaselineUnavailable(f"{FLASHINFER}: this version's decode plan() has no {knob}")
        workspaces: dict[torch.device, torch.Tensor] = {}

        def prepare(*args: Any) -> Callable[[], torch.Tensor]:
            q, k_cache, v_cache, block_table, seq_lens, sm_scale = args
            page = k_cache.shape[1]
            if q.device not in workspaces:
                workspaces[q.device] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
            pages = flashinfer_page_indices(block_table, seq_lens, page)
            # A wrapper holds one plan: a fresh one per prepared batch keeps earlier closures valid.
            wrapper = wrapper_cls(workspaces[q.device], "NHD", use_tensor_cores=True, backend="fa2")
            pinned: dict[str, Any] = (
                {"fixed_split_size": split_pages(page)} if split == "fixed" else {"disable_split_kv": True}
            )
            wrapper.plan(
                pages.indptr,
                pages.indices,
                pages.last_page_len,
                q.shape[1],
                k_cache.shape[2],
                q.shape[2],
                page,
                q_data_type=q.dtype,
                kv_data_type=k_cache.dtype,
                sm_scale=float(sm_scale),
                **pinned,
            )

            def call() -> torch.Tensor:
                out: torch.Tensor = wrapper.run(q, (k_cache, v_cache))
                return out

            return call

        return Prepared(prepare, f"flashinfer_decode_{split}_split", HALF_DTYPES)

    return load


def prepare_gathered_sdpa(*args: Any) -> Callable[[], torch.Tensor]:
    q, k_cache, v_cache, block_table, seq_lens, sm_scale = args
    batch, q_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    max_len = int(seq_lens.max())
    mask = key_mask(seq_lens, max_len)[:, None, None, :]
    q_rows = q.reshape(batch, kv_heads, q_heads // kv_heads, head_dim)

    def call() -> torch.Tensor:
        k = gather_pages(k_cache, block_table, max_len).transpose(1, 2)
        v = gather_pages(v_cache, block_table, max_len).transpose(1, 2)
        o = F.scaled_dot_product_attention(q_rows, k, v, attn_mask=mask, scale=float(sm_scale))
        return o.reshape(batch, q_heads, head_dim)

    return call


_FLASHINFER_SETUP = "BatchDecodeWithPagedKVCacheWrapper(NHD, use_tensor_cores=True, backend='fa2')"

BASELINES: dict[str, tuple[Baseline, ...]] = {
    "attention_decode": (
        Baseline(
            "FlashInfer decode (fixed split)",
            flashinfer_decode("fixed"),
            FLASHINFER,
            note=(
                f"{_FLASHINFER_SETUP}, plan(fixed_split_size={SPLIT_TOKENS} tokens / page size); "
                "page-table conversion and plan() in prepare"
            ),
        ),
        Baseline(
            "FlashInfer decode (no split)",
            flashinfer_decode("none"),
            FLASHINFER,
            note=(
                f"{_FLASHINFER_SETUP}, plan(disable_split_kv=True); "
                "page-table conversion and plan() in prepare"
            ),
        ),
        Baseline(
            "SDPA over gathered pages",
            lambda: Prepared(prepare_gathered_sdpa, "gathered_sdpa"),
            "torch",
            ("cpu", "cuda"),
            "pages gathered and padded to the longest request, boolean key mask, one SDPA call "
            "(default dispatch; GQA folded into the query axis)",
        ),
    ),
}
