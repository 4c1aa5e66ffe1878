"""Which FlashInfer-Bench definitions nodice judges: the adapters of each ``op_type``, and why not.

An op_type may hold several interfaces (FlashInfer-Bench's ``rmsnorm`` is RMSNorm and, with a
``residual`` input, fused add + RMSNorm; ``gqa_paged`` is decode and prefill, with pages of one token
or of many): the definition's inputs pick its :class:`Adapter`. The attention, sampling and MoE
adapters live beside their conversions (:mod:`nodice.tasks.definition_attention`,
:mod:`~nodice.tasks.definition_sampling`, :mod:`~nodice.tasks.definition_moe`); the norms and the GEMM
are a renaming and sit here. A definition no adapter takes is refused in one line that says why:
the op_types and interfaces of FlashInfer-Bench's public dataset that no catalog task computes are
named with their reason.
"""

from __future__ import annotations

from typing import Any

import torch

from nodice.errors import DefinitionError
from nodice.tasks.base import Output
from nodice.tasks.definition_attention import DSA_PAGED, GQA_PAGED, GQA_RAGGED, MLA_PAGED
from nodice.tasks.definition_interface import Adapter, Consts, single, with_lse
from nodice.tasks.definition_moe import MOE
from nodice.tasks.definition_sampling import SAMPLING

__all__ = ["ADAPTERS", "REFUSED", "Adapter", "adapter_for", "with_lse"]


def _pair(outs: tuple[Any, ...], args: tuple[Any, ...]) -> Output:
    return outs[0], outs[1]


def _residual_sum(args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
    """Fused add + RMSNorm's second output where a definition has none (FlashInfer-Bench's published
    ones return the normalised rows only): the residual stream ``x + residual`` in the io dtype."""
    x, residual = args[0], args[1]
    return ((x.float() + residual.float()).to(x.dtype),)


def _norm_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    return {"hidden_states": a[0], "weight": a[1]}


def _add_norm_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    return {"hidden_states": a[0], "residual": a[1], "weight": a[2]}


# fused_add_rmsnorm_h{H}: run(hidden_states, residual, weight) -> output = rmsnorm(hidden_states + residual),
# and, where a definition declares it, the updated residual stream as a second output (judged then).
_FUSED_ADD = Adapter(
    task="add_rmsnorm",
    kind="with residual",
    batch_axis="batch_size",
    inputs=("hidden_states", "residual", "weight"),
    outputs=("output", "residual_out"),
    to_definition=_add_norm_inputs,
    from_definition=_pair,
    const_dims={"H": "hidden_size"},
    var_dims={"B": "batch_size"},
    fixed_variant_keys=("H",),
    optional_outputs=1,
    supplied_outputs=("hidden_states + residual",),
    supply=_residual_sum,
    argument_names=("hidden_states", "residual", "weight", None),
)

ADAPTERS: dict[str, tuple[Adapter, ...]] = {
    # rmsnorm_h{H}: run(hidden_states[batch_size, hidden_size], weight[hidden_size]) -> output; ε lives in
    # the definition's reference, so the task's eps argument is not passed on. FlashInfer-Bench files its
    # fused add + RMSNorm definitions under this op_type too (their residual input tells them apart).
    "rmsnorm": (
        Adapter(
            task="rmsnorm",
            kind="without residual",
            batch_axis="batch_size",
            inputs=("hidden_states", "weight"),
            outputs=("output",),
            to_definition=_norm_inputs,
            from_definition=single,
            const_dims={"H": "hidden_size"},
            var_dims={"B": "batch_size"},
            fixed_variant_keys=("H",),
            argument_names=("hidden_states", "weight", None),
        ),
        _FUSED_ADD,
    ),
    "fused_add_rmsnorm": (_FUSED_ADD,),
    # gemm_n{N}_k{K}: run(A[M, K], B[N, K]) -> C[M, N] = A·Bᵀ (a linear layer's weight layout). The task's
    # b[K, N] is drawn as the transposed view of a contiguous [N, K] weight, so Bᵀ is that weight.
    "gemm": (
        Adapter(
            task="gemm",
            batch_axis="M",
            inputs=("A", "B"),
            outputs=("C",),
            to_definition=lambda a, consts: {"A": a[0], "B": a[1].t().contiguous()},
            from_definition=single,
            const_dims={"N": "N", "K": "K"},
            var_dims={"M": "M"},
            argument_names=("A", None),
        ),
    ),
    "gqa_paged": GQA_PAGED,
    "gqa_ragged": GQA_RAGGED,
    "mla_paged": MLA_PAGED,
    "dsa_paged": DSA_PAGED,
    "sampling": SAMPLING,
    "moe": MOE,
}

# FlashInfer-Bench op_types no catalog task computes, and why.
_NO_TASK = {
    "gdn": "its gated delta rule starts from a given state and derives the gates from A_log, a, dt_bias "
    "and b, with more value heads than key heads; nodice's gdn task starts from zero with g and beta given",
    "mla_ragged": "its query/key width (qk_dim) differs from the value width (vo_dim); "
    "attention_varlen has one head dim",
    "rope": "nodice's catalog has no rotary-embedding task",
    "mamba_ssu": "nodice's catalog has no state-space (Mamba) task",
}

_LLAMA4 = (
    "Llama-4 routing (the sigmoid of the top logit, with a bias) is not the catalog moe task's softmax top-k"
)

# Interfaces of mapped op_types that no catalog task computes: (op_type, the inputs they start with) -> why.
REFUSED: dict[tuple[str, tuple[str, ...]], str] = {
    ("mla_paged", ("q_nope", "q_pe", "ckv_cache", "kpe_cache", "qo_indptr")): (
        "MLA prefill attends several query tokens per request; mla_decode (one query token per "
        "request) is the catalog's only latent attention over a paged cache"
    ),
    ("dsa_paged", ("q_index_fp8",)): (
        "the DSA top-k indexer returns token indices, not attention; no catalog task selects tokens"
    ),
    ("moe", ("routing_logits", "routing_bias")): (
        "DeepSeek-V3 routing (sigmoid scores with a bias, group-limited top-k, routed scaling) is not "
        "the catalog moe task's softmax top-k"
    ),
    ("moe", ("routing_logits", "hidden_states", "gemm1_weights", "gemm2_weights", "routing_bias")): _LLAMA4,
    (
        "moe",
        (
            "routing_logits",
            "hidden_states",
            "gemm1_weights",
            "output1_scales_scalar",
            "output1_scales_gate_scalar",
            "gemm2_weights",
            "output2_scales_scalar",
            "routing_bias",
        ),
    ): _LLAMA4,
}


def _refusal(definition: Any) -> str | None:
    op, inputs = definition.op_type, tuple(definition.inputs)
    return next((why for (o, head), why in REFUSED.items() if o == op and inputs[: len(head)] == head), None)


def adapter_for(definition: Any) -> Adapter:
    """The adapter of ``definition``'s op_type whose interface it has, else a line that says why not."""
    name, op = definition.name, definition.op_type
    adapters = ADAPTERS.get(op)
    if adapters is None:
        why = _NO_TASK.get(op, f"mapped: {', '.join(sorted(ADAPTERS))}")
        raise DefinitionError(f"definition {name}: op_type '{op}' maps to no nodice task ({why})")
    got = (tuple(definition.inputs), tuple(definition.outputs))
    adapter = next((a for a in adapters if a.accepts(*got)), None)
    if adapter is None:
        refused = _refusal(definition)
        if refused is not None:
            raise DefinitionError(f"definition {name}: nodice does not judge this {op} interface: {refused}")
        known = "; ".join(a.interface() for a in adapters)
        raise DefinitionError(
            f"definition {name}: inputs {list(got[0])} and outputs {list(got[1])} are not a {op} interface "
            f"nodice adapts ({known})"
        )
    consts = definition.const_axes
    missing = [a for a in adapter.const_dims.values() if a not in consts]
    if adapter.batch_axis not in definition.var_axes or missing:
        raise DefinitionError(
            f"definition {name}: nodice's {op} adapter needs the variable axis "
            f"{adapter.batch_axis} and the const axes {sorted(adapter.const_dims.values())}"
        )
    for axis, (want, why) in adapter.required_consts.items():
        if consts.get(axis) != want:
            raise DefinitionError(
                f"definition {name}: nodice adapts {op} with {axis} {want} ({why}), not {consts.get(axis)}"
            )
    why = adapter.refuse_sizes(consts) if adapter.refuse_sizes is not None else ""
    if why:
        raise DefinitionError(f"definition {name}: {why}")
    empty = _empty_axis(definition, adapter)
    if empty:
        raise DefinitionError(
            f"definition {name}: const axis {empty} is {consts[empty]}: a size must be at least 1"
        )
    return adapter


def _empty_axis(definition: Any, adapter: Adapter) -> str | None:
    """A const axis below 1 that a tensor of the definition or a size of the catalog task is made of."""
    consts = definition.const_axes
    used = set(adapter.const_dims.values())
    for spec in (*definition.inputs.values(), *definition.outputs.values()):
        used.update(spec.shape or ())
    return next((a for a in consts if a in used and int(consts[a]) < 1), None)
