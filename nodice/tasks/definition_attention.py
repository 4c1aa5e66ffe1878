"""FlashInfer-Bench's attention definitions on the catalog's attention tasks.

* ``gqa_paged`` decode (``kv_indptr``, ``kv_indices``, and ``kv_last_page_len`` when pages hold more
  than one token) → ``attention_decode``: its block table and lengths become the CSR page lists.
* ``gqa_paged`` prefill (``qo_indptr`` too) and ``gqa_ragged`` prefill → ``attention_varlen``: the
  packed queries are the definition's; the packed keys and values are paged for ``gqa_paged``
  (:func:`packed_pages`) and passed as they are for ``gqa_ragged``.
* ``mla_paged`` decode → ``mla_decode``: MLA's absorbed query and latent cache split into the
  no-position part (``q_nope``, ``ckv_cache``) and the RoPE part (``q_pe``, ``kpe_cache``).
* ``dsa_paged`` sparse attention → ``dsa``, where the task keeps one concatenated ``Dqk`` layout.

Every one returns ``(output, lse)``; the task's output is ``o`` and the definition task judges ``lse``
(base-2 log-sum-exp per row and head) as a second output.
"""

from __future__ import annotations

from typing import Any

from nodice.tasks.definition_interface import Adapter, Consts, packed_pages, page_lists, with_lse
from nodice.tasks.mla_decode import CKV_DIM, KPE_DIM

_TOKENS_PER_PAGE = "its kv_indices list tokens"
_LATENT = "the widths of mla_decode's latent"


def gqa_decode_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    """attention_decode's arguments as ``gqa_paged`` decode inputs (with ``kv_last_page_len`` when
    the definition takes it; page size 1 lists tokens and needs none)."""
    q, k_cache, v_cache, block_table, seq_lens, sm_scale = a
    kv_indptr, kv_indices, last = page_lists(block_table, seq_lens, int(k_cache.shape[1]))
    return {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "kv_indptr": kv_indptr,
        "kv_indices": kv_indices,
        "kv_last_page_len": last,
        "sm_scale": float(sm_scale),
    }


def mla_decode_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    """mla_decode's arguments as ``mla_paged`` decode inputs."""
    q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale = a
    kv_indptr, kv_indices, last = page_lists(block_table, seq_lens, int(ckv_cache.shape[1]))
    return {
        "q_nope": q_nope,
        "q_pe": q_pe,
        "ckv_cache": ckv_cache,
        "kpe_cache": kpe_cache,
        "kv_indptr": kv_indptr,
        "kv_indices": kv_indices,
        "kv_last_page_len": last,
        "sm_scale": float(sm_scale),
    }


def varlen_ragged_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    """attention_varlen's arguments as ``gqa_ragged`` inputs: the same packing, offsets renamed."""
    q, k, v, cu_q, cu_k, _, _, _, sm_scale = a
    return {"q": q, "k": k, "v": v, "qo_indptr": cu_q, "kv_indptr": cu_k, "sm_scale": float(sm_scale)}


def varlen_paged_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    """attention_varlen's arguments as ``gqa_paged`` prefill inputs: keys and values paged."""
    q, k, v, cu_q, cu_k, _, _, _, sm_scale = a
    k_cache, v_cache, kv_indptr, kv_indices, last = packed_pages(k, v, cu_k, int(consts["page_size"]))
    return {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "qo_indptr": cu_q,
        "kv_indptr": kv_indptr,
        "kv_indices": kv_indices,
        "kv_last_page_len": last,
        "sm_scale": float(sm_scale),
    }


def dsa_sparse_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    """dsa's arguments as ``run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale)``.

    The last axis of ``q`` and ``kv_cache`` is split at ``d_v`` (contiguous copies, as FlashInfer-Bench
    allocates them); ``sparse_indices`` are the task's global slots (``page * page_size + offset``, ``-1``
    unused), and ``cu_seqlens_q`` is not passed: every row's output depends on its own indices only.
    """
    q, kv_cache, indices, _, sm_scale, d_v = a
    d_v = int(d_v)
    return {
        "q_nope": q[..., :d_v].contiguous(),
        "q_pe": q[..., d_v:].contiguous(),
        "ckv_cache": kv_cache[..., :d_v].contiguous(),
        "kpe_cache": kv_cache[..., d_v:].contiguous(),
        "sparse_indices": indices,
        "sm_scale": float(sm_scale),
    }


def _dsa_tokens(params: dict[str, Any]) -> dict[str, Any]:
    """dsa's workloads: ``B`` requests of ``rows`` query rows are the definition's ``num_tokens``."""
    return {"T": int(params["B"]) * int(params["rows"])}


_GQA = ("q", "k_cache", "v_cache")
_GQA_HEADS = {"Hq": "num_qo_heads", "Hkv": "num_kv_heads", "D": "head_dim"}
_DECODE_ARGS = ("q", "k_cache", "v_cache", None, None, "sm_scale")
_VARLEN_ARGS = ("q", None, None, "qo_indptr", None, None, None, None, "sm_scale")
# A packed batch's variable axes (nodice.tasks.definition_sizes derives them from a workload's lengths).
_VARLEN_AXES = ("total_q", "total_kv", "len_indptr", "num_pages", "num_kv_indices")


def _gqa_decode(kind: str, inputs: tuple[str, ...], required: dict[str, tuple[int, str]]) -> Adapter:
    # gqa_paged_decode_h{Hq}_kv{Hkv}_d{D}_ps{P}: run(q, k_cache, v_cache, kv_indptr, kv_indices,
    # [kv_last_page_len,] sm_scale) -> (output, lse).
    return Adapter(
        task="attention_decode",
        kind=kind,
        batch_axis="batch_size",
        inputs=inputs,
        outputs=("output", "lse"),
        to_definition=gqa_decode_inputs,
        from_definition=with_lse,
        const_dims={**_GQA_HEADS, "page": "page_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("layout", "head_dim", "page"),
        required_consts=required,
        judges_lse=True,
        argument_names=_DECODE_ARGS,
    )


def _gqa_prefill(
    kind: str,
    inputs: tuple[str, ...],
    to_definition: Any,
    paged: bool,
    required: dict[str, tuple[int, str]] | None = None,
) -> Adapter:
    # gqa_paged_prefill_causal_h{Hq}_kv{Hkv}_d{D}_ps{P} and gqa_ragged_prefill_causal_h{Hq}_kv{Hkv}_d{D}:
    # the packed batch of attention_varlen, causal (FlashInfer-Bench's prefill definitions are).
    return Adapter(
        task="attention_varlen",
        kind=kind,
        batch_axis="len_indptr",
        inputs=inputs,
        outputs=("output", "lse"),
        to_definition=to_definition,
        from_definition=with_lse,
        const_dims={**_GQA_HEADS, "page": "page_size"} if paged else dict(_GQA_HEADS),
        var_dims={axis: axis for axis in _VARLEN_AXES} | {"B": "batch_size"},
        fixed_variant_keys=("layout", "head_dim", "causal"),
        required_consts=required or {},
        judges_lse=True,
        argument_names=_VARLEN_ARGS,
    )


def _mla_decode(kind: str, inputs: tuple[str, ...], required: dict[str, tuple[int, str]]) -> Adapter:
    # mla_paged_decode_h{H}_ckv512_kpe64_ps{P}: run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr,
    # kv_indices, [kv_last_page_len,] sm_scale) -> (output, lse); output and the base-2 lse are judged.
    return Adapter(
        task="mla_decode",
        kind=kind,
        batch_axis="batch_size",
        inputs=inputs,
        outputs=("output", "lse"),
        to_definition=mla_decode_inputs,
        from_definition=with_lse,
        const_dims={"H": "num_qo_heads", "page": "page_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("heads", "page"),
        required_consts={
            **required,
            "head_dim_ckv": (CKV_DIM, _LATENT),
            "head_dim_kpe": (KPE_DIM, _LATENT),
        },
        judges_lse=True,
        argument_names=("q_nope", "q_pe", "ckv_cache", "kpe_cache", None, None, "sm_scale"),
    )


_PAGE_LISTS = ("kv_indptr", "kv_indices")
_LAST_PAGE = ("kv_last_page_len",)
_ONE_TOKEN_PAGES = {"page_size": (1, _TOKENS_PER_PAGE)}

GQA_PAGED = (
    _gqa_decode("decode, page size 1", (*_GQA, *_PAGE_LISTS, "sm_scale"), _ONE_TOKEN_PAGES),
    _gqa_decode("decode", (*_GQA, *_PAGE_LISTS, *_LAST_PAGE, "sm_scale"), {}),
    _gqa_prefill(
        "prefill, page size 1",
        (*_GQA, "qo_indptr", *_PAGE_LISTS, "sm_scale"),
        varlen_paged_inputs,
        paged=True,
        required=_ONE_TOKEN_PAGES,
    ),
    _gqa_prefill(
        "prefill",
        (*_GQA, "qo_indptr", *_PAGE_LISTS, *_LAST_PAGE, "sm_scale"),
        varlen_paged_inputs,
        paged=True,
    ),
)
GQA_RAGGED = (
    _gqa_prefill(
        "prefill",
        ("q", "k", "v", "qo_indptr", "kv_indptr", "sm_scale"),
        varlen_ragged_inputs,
        paged=False,
    ),
)

_MLA = ("q_nope", "q_pe", "ckv_cache", "kpe_cache")
MLA_PAGED = (
    _mla_decode("decode, page size 1", (*_MLA, *_PAGE_LISTS, "sm_scale"), _ONE_TOKEN_PAGES),
    _mla_decode("decode", (*_MLA, *_PAGE_LISTS, *_LAST_PAGE, "sm_scale"), {}),
)

# dsa_sparse_attention_h{H}_ckv{d_v}_kpe{d_rope}_topk{K}_ps{P}: run(q_nope, q_pe, ckv_cache, kpe_cache,
# sparse_indices, sm_scale) -> (output, lse). dsa's q and kv_cache split at d_v; its indices are the
# sparse indices (global slots, -1 unused); output and the base-2 lse are both judged.
DSA_PAGED = (
    Adapter(
        task="dsa",
        kind="sparse attention",
        batch_axis="num_tokens",
        inputs=(*_MLA, "sparse_indices", "sm_scale"),
        outputs=("output", "lse"),
        to_definition=dsa_sparse_inputs,
        from_definition=with_lse,
        const_dims={
            "H": "num_qo_heads",
            "d_v": "head_dim_ckv",
            "d_rope": "head_dim_kpe",
            "page": "page_size",
            "topk": "topk",
        },
        var_dims={"T": "num_tokens"},
        fixed_variant_keys=("heads",),
        judges_lse=True,
        derived_params=_dsa_tokens,
        argument_names=(None, None, "sparse_indices", None, "sm_scale", None),
    ),
)
