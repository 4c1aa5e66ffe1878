"""Sparse MLA baselines: each row's top-k latent vectors gathered densely, then one SDPA call.

What a torch-only server does for DeepSeek sparse attention: gather every query
row's selected cache slots into ``[rows, topk, Dqk]`` (``-1`` entries read slot
0 and are masked), and attend with SDPA, the row's heads as query positions over
one shared key/value head (MQA), the value being the first ``d_v`` columns of the
key. Rows are gathered in chunks whose keys fit :data:`GATHER_BYTES`, so the
baseline runs at DeepSeek-V3.2's prefill sizes.

No library sparse kernel runs on the machines this project benchmarks on:
FlashInfer 0.6.18's sparse MLA (``trtllm_batch_decode_with_kv_cache_mla`` with
``sparse_mla_top_k``) has kernels for SM100/SM103 (TRTLLM-GEN) and SM120/SM121
(an fp8-packed cache) only, and FlashMLA is not on PyPI (SGLang's
``sgl-flash-mla`` wheel requires torch ≥ 2.14.1). See docs/tasks-attention.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines.spec import Baseline, Prepared

# Gathered keys per chunk of rows (16-bit on GPU: ~900 rows of 2048 × 576 at 2 GiB).
GATHER_BYTES = 2 << 30


def gathered_sdpa(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    sm_scale: float,
    d_v: int,
) -> torch.Tensor:
    """The task's output through a dense gather and SDPA (default dispatch)."""
    rows, heads, d_qk = q.shape
    topk = indices.shape[1]
    tokens = kv_cache.reshape(-1, d_qk)
    out = torch.empty((rows, heads, int(d_v)), dtype=q.dtype, device=q.device)
    step = max(1, GATHER_BYTES // max(1, topk * d_qk * kv_cache.element_size()))
    for start in range(0, rows, step):
        idx = indices[start : start + step]
        used = idx >= 0
        keys = tokens[idx.clamp(min=0).long()].unsqueeze(1)  # [r, 1, topk, Dqk]
        o = F.scaled_dot_product_attention(
            q[start : start + step].unsqueeze(1),  # [r, 1, H, Dqk]: the heads as query positions
            keys,
            keys[..., : int(d_v)],
            attn_mask=used[:, None, None, :],
            scale=float(sm_scale),
        ).squeeze(1)
        # A row with no used entry attends to nothing: 0 (SDPA gives NaN there).
        out[start : start + step] = torch.where(used.any(dim=1)[:, None, None], o, torch.zeros_like(o))
    return out


def _load_gathered_sdpa() -> Callable[..., Any]:
    return Prepared(lambda *args: lambda: gathered_sdpa(*args), "gathered_sdpa")


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "dsa": (
        Baseline(
            "SDPA over gathered top-k",
            _load_gathered_sdpa,
            "torch",
            ("cpu", "cuda"),
            "each row's top-k latent vectors gathered to [rows, topk, Dqk] (chunks of 2 GiB), -1 masked, "
            "one SDPA call per chunk with the heads as query positions (MQA, default dispatch)",
        ),
    ),
}
