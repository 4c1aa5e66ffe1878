"""MLA decode baselines: FlashInfer's paged MLA wrapper, and torch attention over gathered latent pages.

FlashInfer's ``BatchMLAPagedAttentionWrapper`` takes the task's tensors as they
are (``q_nope``, ``q_pe``, ``ckv_cache[P, page, 512]``, ``kpe_cache[P, page, 64]``)
and the page table in its CSR form: the block table and lengths become
``kv_indptr``/``kv_indices`` (:func:`~nodice.measuring.baselines.paged_kv.flashinfer_page_indices`),
``kv_len_arr`` is ``seq_lens`` and, one query per request, ``qo_indptr`` is
``0 … B``. Unlike its GQA decode, its MLA ``plan()`` has no knob that fixes the
KV split (no ``fixed_split_size``, no ``disable_split_kv``): the plan
load-balances the batch's KV over the SMs, so it runs as a server runs it, and
the BI audit says what that schedule does. The conversion and ``plan()`` are
per-step setup in a server: they run in ``prepare``.

The torch baseline is what a server without an MLA kernel does: gather each
request's latent pages, pad to the batch's longest request, and run one SDPA
call with the query heads as query rows of the single latent kv head
(keys ``[ckv, kpe]``, 576 wide; values ``ckv``), a boolean mask hiding the padding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines.attention_decode import FLASHINFER, HALF_DTYPES
from nodice.measuring.baselines.paged_kv import flashinfer_page_indices, gather_pages, key_mask
from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, Prepared, require

# FlashInfer's float workspace (split partial outputs and their LSEs); its docs recommend 128 MiB.
WORKSPACE_BYTES = 512 << 20


def flashinfer_mla_plan_args(*args: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``BatchMLAPagedAttentionWrapper.plan``'s arguments for the task's kernel arguments."""
    q_nope, q_pe, ckv_cache, _, block_table, seq_lens, sm_scale = args
    batch, heads, ckv_dim = q_nope.shape
    page = ckv_cache.shape[1]
    pages = flashinfer_page_indices(block_table, seq_lens, page)
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=q_nope.device)
    positional = (
        qo_indptr,
        pages.indptr,
        pages.indices,
        seq_lens.to(torch.int32),
        heads,
        ckv_dim,
        q_pe.shape[2],
        page,
        False,  # causal: one query per request sees all of its tokens
        float(sm_scale),
        q_nope.dtype,
        ckv_cache.dtype,
    )
    return positional, {}


def load_flashinfer_mla() -> Callable[..., Any]:
    mla = require("flashinfer.mla", FLASHINFER)
    if not torch.cuda.is_available():
        raise BaselineUnavailable(f"{FLASHINFER}: its MLA kernels need a CUDA device")
    wrapper_cls = mla.BatchMLAPagedAttentionWrapper
    workspaces: dict[torch.device, torch.Tensor] = {}

    def prepare(*args: Any) -> Callable[[], torch.Tensor]:
        q_nope, q_pe, ckv_cache, kpe_cache = args[:4]
        if q_nope.device not in workspaces:
            workspaces[q_nope.device] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=q_nope.device)
        # A wrapper holds one plan: a fresh one per prepared batch keeps earlier closures valid.
        wrapper = wrapper_cls(workspaces[q_nope.device], backend="auto")
        positional, keywords = flashinfer_mla_plan_args(*args)
        wrapper.plan(*positional, **keywords)

        def call() -> torch.Tensor:
            out: torch.Tensor = wrapper.run(q_nope, q_pe, ckv_cache, kpe_cache)
            return out

        return call

    return Prepared(prepare, "flashinfer_mla", HALF_DTYPES)


def prepare_gathered_mla(*args: Any) -> Callable[[], torch.Tensor]:
    q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale = args
    max_len = int(seq_lens.max())
    mask = key_mask(seq_lens, max_len)[:, None, None, :]
    # [B, 1 kv head, H query rows, 576]
    q = torch.cat([q_nope, q_pe], dim=-1).unsqueeze(1)

    def call() -> torch.Tensor:
        ckv = gather_pages(ckv_cache.unsqueeze(2), block_table, max_len).transpose(1, 2)
        kpe = gather_pages(kpe_cache.unsqueeze(2), block_table, max_len).transpose(1, 2)
        k = torch.cat([ckv, kpe], dim=-1)
        o = F.scaled_dot_product_attention(q, k, ckv, attn_mask=mask, scale=float(sm_scale))
        return o.squeeze(1)

    return call


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "mla_decode": (
        Baseline(
            "FlashInfer MLA",
            load_flashinfer_mla,
            FLASHINFER,
            note=(
                "BatchMLAPagedAttentionWrapper(backend='auto'), plan(qo_indptr=0..B, kv_indptr, "
                "kv_indices, kv_len_arr=seq_lens, causal=False): its own batch-balanced KV split "
                "(the MLA plan offers no fixed split); page-table conversion and plan() in prepare"
            ),
        ),
        Baseline(
            "SDPA over gathered latent pages",
            lambda: Prepared(prepare_gathered_mla, "gathered_mla_sdpa"),
            "torch",
            ("cpu", "cuda"),
            "latent pages gathered and padded to the longest request, keys [ckv, kpe] (576), "
            "values ckv, query heads as query rows of one kv head, boolean key mask, one SDPA call "
            "(default dispatch)",
        ),
    ),
}
