"""``attn_implementation="nodice"``: transformers' attention calls on contiguous batches.

A call ``(module, query[B,Hq,S,D], key[B,Hkv,Sk,D], value, attention_mask, ...)`` goes to

* ``attention_prefill`` when every sequence has as many keys as queries (a prompt's forward),
* ``attention_varlen`` when the keys run ahead of the queries (a step over a cache; causal
  aligned bottom-right) or the batch is packed (``cu_seq_lens_q/k`` passed, as for
  FlashAttention's varlen path),

and anything else to transformers' own SDPA implementation, counted with its reason:
an attention mask (a padded batch: its rows are not independent of the padding), dropout in
training, a gradient (the kernels have no backward), a dtype or head dim the gate did not
validate. The mask function registered for ``"nodice"`` is SDPA's, which gives ``None`` for
an unpadded causal batch, so only padded batches fall back.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from nodice.integrations.transformers.kernels import KernelSet, kernels_for


def _uncovered(
    ks: KernelSet, module: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, dropout: float
) -> str | None:
    if mask is not None:
        return "an attention mask (padded batch)"
    if dropout and module.training:
        return "dropout"
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return "an input requires grad (the kernels have no backward)"
    if q.shape[1] % k.shape[1] != 0:
        return f"{q.shape[1]} query heads over {k.shape[1]} kv heads"
    return ks.refuse("attention_varlen", q, k, v)


def nodice_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    ks = kernels_for(query.device)
    stats = ks.count("attention")
    causal = bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)
    scale = float(query.shape[-1] ** -0.5 if scaling is None else scaling)
    packed = kwargs.get("cu_seq_lens_q") is not None and query.shape[0] == 1
    reason = _uncovered(ks, module, query, key, value, attention_mask, dropout)
    if reason is None and packed and kwargs.get("cu_seq_lens_k") is None:
        reason = "cu_seq_lens_q without cu_seq_lens_k"
    if reason is None and not packed and key.shape[2] < query.shape[2]:
        reason = "fewer keys than queries"
    if reason is not None:
        stats.fell_back(reason)
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    stats.routed += 1
    batch, q_heads, seq, dim = query.shape
    if not packed and key.shape[2] == seq and ks.refuse("attention_prefill", query, key, value) is None:
        fn = ks.fn("attention_prefill")
        assert fn is not None
        out: torch.Tensor = fn(query.contiguous(), key.contiguous(), value.contiguous(), causal, scale)
        return out.transpose(1, 2), None
    # Tokens packed back to back: [B·S, H, D] with one sequence per batch row (or as passed).
    q = query.transpose(1, 2).reshape(batch * seq, q_heads, dim)
    k = key.transpose(1, 2).reshape(-1, key.shape[1], dim)
    v = value.transpose(1, 2).reshape(-1, value.shape[1], dim)
    if packed:
        cu_q = kwargs["cu_seq_lens_q"].to(torch.int32)
        cu_k = kwargs["cu_seq_lens_k"].to(torch.int32)
        max_q = int(kwargs.get("max_length_q") or kwargs.get("max_seqlen_q") or seq)
        max_k = int(kwargs.get("max_length_k") or kwargs.get("max_seqlen_k") or key.shape[2])
    else:
        rows = torch.arange(batch + 1, dtype=torch.int32, device=query.device)
        cu_q, cu_k = rows * seq, rows * key.shape[2]
        max_q, max_k = seq, key.shape[2]
    fn = ks.fn("attention_varlen")
    assert fn is not None
    o: torch.Tensor = fn(
        q.contiguous(), k.contiguous(), v.contiguous(), cu_q, cu_k, max_q, max_k, causal, scale
    )
    return o.view(batch, seq, q_heads, dim), None
