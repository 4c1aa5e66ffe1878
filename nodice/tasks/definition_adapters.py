"""How FlashInfer-Bench definitions map onto catalog tasks: one :class:`Adapter` per ``op_type``.

An adapter turns a catalog task's arguments into the definition's named inputs and the
definition's outputs back into the task's output (a reshape where one suffices). The page-list
definitions (``gqa_paged``, ``mla_paged`` decode with page size 1) take CSR page lists
(``kv_indptr``, ``kv_indices``) where the catalog tasks take ``block_table[B, maxp]`` and
``seq_lens[B]``; ``mla_paged`` and ``dsa_paged`` split MLA's absorbed query and latent cache into
the no-position part (``q_nope``, ``ckv_cache``) and the RoPE part (``q_pe``, ``kpe_cache``), where
``dsa`` keeps one concatenated ``Dqk`` layout. Both latent definitions return ``(output, lse)``:
the task's output is ``o`` and the definition task judges ``lse`` (base-2 log-sum-exp per row and
head) as a second output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from nodice.errors import DefinitionError, EntryPointError
from nodice.tasks.base import Output
from nodice.tasks.mla_decode import CKV_DIM, KPE_DIM


def page_lists(block_table: torch.Tensor, seq_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``kv_indptr = [0, cumsum(seq_lens)]`` and ``kv_indices`` (each row's used entries), page size 1."""
    lens = seq_lens.long()
    kv_indptr = torch.zeros(len(lens) + 1, dtype=torch.int32, device=block_table.device)
    kv_indptr[1:] = torch.cumsum(lens, 0).to(torch.int32)
    used = torch.arange(block_table.shape[1], device=block_table.device)[None, :] < lens[:, None]
    return kv_indptr, block_table[used].to(torch.int32)


def gqa_paged_inputs(a: tuple[Any, ...]) -> dict[str, Any]:
    q, k_cache, v_cache, block_table, seq_lens, sm_scale = a
    kv_indptr, kv_indices = page_lists(block_table, seq_lens)
    return {
        "q": q,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "kv_indptr": kv_indptr,
        "kv_indices": kv_indices,
        "sm_scale": float(sm_scale),
    }


def mla_paged_inputs(a: tuple[Any, ...]) -> dict[str, Any]:
    """mla_decode's arguments as FlashInfer-Bench's ``mla_paged`` decode inputs (page size 1)."""
    q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale = a
    kv_indptr, kv_indices = page_lists(block_table, seq_lens)
    return {
        "q_nope": q_nope,
        "q_pe": q_pe,
        "ckv_cache": ckv_cache,
        "kpe_cache": kpe_cache,
        "kv_indptr": kv_indptr,
        "kv_indices": kv_indices,
        "sm_scale": float(sm_scale),
    }


def dsa_sparse_inputs(a: tuple[Any, ...]) -> dict[str, Any]:
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


def with_lse(outs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output, lse)``: both are judged (against the definition's reference, and for invariance)."""
    if len(outs) != 2:
        raise EntryPointError(
            f"the entry returned {len(outs)} tensor(s); the definition's outputs are (output, lse) and "
            "nodice judges both: return both, or write both under destination-passing style"
        )
    return outs[0], outs[1]


@dataclass(frozen=True)
class Adapter:
    """How one op_type's definitions map onto a catalog task (an adapter is a reshape where possible)."""

    task: str
    # The definition's variable axis that is the batch (a sample is one index of it).
    batch_axis: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    # The task's arguments as the definition's inputs, by name.
    to_definition: Callable[[tuple[Any, ...]], dict[str, Any]]
    # The definition's outputs (in its order) as the task's output, given the task's arguments.
    from_definition: Callable[[tuple[torch.Tensor, ...], tuple[Any, ...]], Output]
    # Task dimension -> the definition's const axis that fixes it.
    const_dims: dict[str, str] = field(default_factory=dict)
    # Task workload parameter -> the definition's variable axis it is (for the Trace's workload axes).
    var_dims: dict[str, str] = field(default_factory=dict)
    # Keys of a context's problem variant that the definition fixes (they are dropped from the variant).
    fixed_variant_keys: tuple[str, ...] = ()
    # Const axes whose value the task fixes: axis -> (the value nodice adapts, why).
    required_consts: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The definition's second output ``lse`` is judged as a second output of the task.
    judges_lse: bool = False
    # Workload parameters derived from the task's (a definition's variable axis that is no task parameter).
    derived_params: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def _single(outs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> Output:
    return outs[0]


def _with_residual_sum(outs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> Output:
    """FlashInfer-Bench's fused_add_rmsnorm returns the normalised rows only; the task's second output,
    the residual stream ``x + residual`` rounded to the io dtype, is supplied here (only ``output`` is the
    solution's, and only it is judged)."""
    x, residual = args[0], args[1]
    return outs[0], (x.float() + residual.float()).to(x.dtype)


def _dsa_tokens(params: dict[str, Any]) -> dict[str, Any]:
    """dsa's workloads: ``B`` requests of ``rows`` query rows are the definition's ``num_tokens``."""
    return {"T": int(params["B"]) * int(params["rows"])}


_PAGE_LISTS = "its kv_indices list tokens"
_LATENT = "the widths of mla_decode's latent"

ADAPTERS: dict[str, Adapter] = {
    # rmsnorm_h{H}: run(hidden_states[batch_size, hidden_size], weight[hidden_size]) -> output; ε lives in
    # the definition's reference, so the task's eps argument is not passed on.
    "rmsnorm": Adapter(
        task="rmsnorm",
        batch_axis="batch_size",
        inputs=("hidden_states", "weight"),
        outputs=("output",),
        to_definition=lambda a: {"hidden_states": a[0], "weight": a[1]},
        from_definition=_single,
        const_dims={"H": "hidden_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("H",),
    ),
    # fused_add_rmsnorm_h{H}: run(hidden_states, residual, weight) -> rmsnorm(hidden_states + residual).
    "fused_add_rmsnorm": Adapter(
        task="add_rmsnorm",
        batch_axis="batch_size",
        inputs=("hidden_states", "residual", "weight"),
        outputs=("output",),
        to_definition=lambda a: {"hidden_states": a[0], "residual": a[1], "weight": a[2]},
        from_definition=_with_residual_sum,
        const_dims={"H": "hidden_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("H",),
    ),
    # gqa_paged_decode_h{Hq}_kv{Hkv}_d{D}_ps1: run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale)
    # -> (output, lse). The task's block table and lengths become the CSR page lists; output is judged,
    # lse (log-sum-exp per head) is not part of the task's output.
    "gqa_paged": Adapter(
        task="attention_decode",
        batch_axis="batch_size",
        inputs=("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale"),
        outputs=("output", "lse"),
        to_definition=gqa_paged_inputs,
        from_definition=_single,
        const_dims={"Hq": "num_qo_heads", "Hkv": "num_kv_heads", "D": "head_dim", "page": "page_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("layout", "head_dim", "page"),
        required_consts={"page_size": (1, _PAGE_LISTS)},
    ),
    # mla_paged_decode_h{H}_ckv512_kpe64_ps1: run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices,
    # sm_scale) -> (output, lse). mla_decode's block table and lengths become the CSR page lists
    # (seq_lens = diff(kv_indptr)); output and the base-2 lse are both judged.
    "mla_paged": Adapter(
        task="mla_decode",
        batch_axis="batch_size",
        inputs=("q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale"),
        outputs=("output", "lse"),
        to_definition=mla_paged_inputs,
        from_definition=with_lse,
        const_dims={"H": "num_qo_heads", "page": "page_size"},
        var_dims={"B": "batch_size"},
        fixed_variant_keys=("heads", "page"),
        required_consts={
            "page_size": (1, _PAGE_LISTS),
            "head_dim_ckv": (CKV_DIM, _LATENT),
            "head_dim_kpe": (KPE_DIM, _LATENT),
        },
        judges_lse=True,
    ),
    # dsa_sparse_attention_h{H}_ckv{d_v}_kpe{d_rope}_topk{K}_ps{P}: run(q_nope, q_pe, ckv_cache, kpe_cache,
    # sparse_indices, sm_scale) -> (output, lse). dsa's q and kv_cache split at d_v; its indices are the
    # sparse indices (global slots, -1 unused); output and the base-2 lse are both judged.
    "dsa_paged": Adapter(
        task="dsa",
        batch_axis="num_tokens",
        inputs=("q_nope", "q_pe", "ckv_cache", "kpe_cache", "sparse_indices", "sm_scale"),
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
    ),
    # gemm_n{N}_k{K}: run(A[M, K], B[N, K]) -> C[M, N] = A·Bᵀ (a linear layer's weight layout). The task's
    # b[K, N] is drawn as the transposed view of a contiguous [N, K] weight, so Bᵀ is that weight, no copy.
    "gemm": Adapter(
        task="gemm",
        batch_axis="M",
        inputs=("A", "B"),
        outputs=("C",),
        to_definition=lambda a: {"A": a[0], "B": a[1].t().contiguous()},
        from_definition=_single,
        const_dims={"N": "N", "K": "K"},
        var_dims={"M": "M"},
    ),
}


def adapter_for(definition: Any) -> Adapter:
    """The adapter of ``definition``'s op_type; its inputs and outputs must be the ones the adapter knows."""
    adapter = ADAPTERS.get(definition.op_type)
    if adapter is None:
        raise DefinitionError(
            f"definition {definition.name}: op_type '{definition.op_type}' maps to no nodice task "
            f"(mapped: {', '.join(sorted(ADAPTERS))})"
        )
    got = (tuple(definition.inputs), tuple(definition.outputs))
    if got != (adapter.inputs, adapter.outputs):
        raise DefinitionError(
            f"definition {definition.name}: inputs {list(got[0])} and outputs {list(got[1])} are not the "
            f"{definition.op_type} interface nodice adapts "
            f"({list(adapter.inputs)} -> {list(adapter.outputs)})"
        )
    consts = definition.const_axes
    missing = [a for a in adapter.const_dims.values() if a not in consts]
    if adapter.batch_axis not in definition.var_axes or missing:
        raise DefinitionError(
            f"definition {definition.name}: nodice's {definition.op_type} adapter needs the variable axis "
            f"{adapter.batch_axis} and the const axes {sorted(adapter.const_dims.values())}"
        )
    for axis, (want, why) in adapter.required_consts.items():
        if consts.get(axis) != want:
            raise DefinitionError(
                f"definition {definition.name}: nodice adapts {definition.op_type} with {axis} {want} "
                f"({why}), not {consts.get(axis)}"
            )
    return adapter
