"""FlashInfer-Bench's MoE definitions with renormalize routing on the catalog's ``moe`` task.

The catalog task routes each token by softmax over the experts, top-k and renormalise, which is
FlashInfer's "renormalize" routing (top-k of the logits, softmax over those k): the same weights.
Its SwiGLU takes the gate half of ``w_gate_up[e]`` first; FlashInfer-Bench's ``gemm1_weights[e]``
holds the up half (``act``) first, so the halves swap. Four interfaces take the task's tokens:

* ``trtllm_fp4_block_scale_moe_topk{K}_e{E}_h{H}_i{I}``: bf16 tokens and routing logits, fp32 weights
  (the definition's own stand-in for FlashInfer's MxFP4 weights).
* ``trtllm_fp4_block_scale_routed_moe_…``: the routing precomputed, ``topk_ids[T, K]`` int32 packing
  each expert index (high 16 bits) with its weight in bf16 (low 16 bits).
* ``moe_fp8_block_scale_renorm_topk{K}_e{E}_h{H}_i{I}``: fp8 e4m3 tokens with one scale per token and
  128 columns (``hidden_states_scale[H/128, T]``), fp8 weights with one scale per 128×128 block.
* ``trtllm_fp8_per_tensor_scale_moe_…``: fp8 tokens as they are, fp8 weights with one scale per
  expert and projection (``output1_scales_scalar``, ``output1_scales_gate_scalar``,
  ``output2_scales_scalar``).

Quantization is the adapter's: a token's fp8 values and scales depend on that token only, the
weights' on the weights only; correctness is judged against the definition's reference on the
quantized inputs, so both see the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodice.tasks.definition_interface import Adapter, Consts, single

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128

# The weights change only when the problem does: one conversion per weight tensor and version.
_CONVERTED: dict[tuple[str, int, int, int], Any] = {}


def _once(kind: str, w: torch.Tensor, convert: Any) -> Any:
    key = (kind, id(w), w._version, w.data_ptr())
    if key not in _CONVERTED:
        _CONVERTED.clear()  # one problem's weights at a time: they may be large
        _CONVERTED[key] = convert(w)
    return _CONVERTED[key]


def up_gate(w_gate_up: torch.Tensor) -> torch.Tensor:
    """``[Wg; Wu]`` (the catalog's order) as ``[Wu; Wg]`` (FlashInfer-Bench's ``gemm1_weights``)."""
    inter = w_gate_up.shape[1] // 2
    return torch.cat([w_gate_up[:, inter:], w_gate_up[:, :inter]], dim=1)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``[T, H]`` as fp8 with one scale per token and 128 columns: ``(x_fp8, scale[H/128, T])``."""
    t, h = x.shape
    blocks = x.float().view(t, h // BLOCK, BLOCK)
    scale = (blocks.abs().amax(dim=-1) / FP8_MAX).clamp(min=1e-12)
    q = (blocks / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(t, h)
    return q, scale.t().contiguous()


def quantize_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``[E, R, C]`` as fp8 with one scale per 128×128 block: ``(w_fp8, scale[E, R/128, C/128])``."""
    e, r, c = w.shape
    blocks = w.float().view(e, r // BLOCK, BLOCK, c // BLOCK, BLOCK)
    scale = (blocks.abs().amax(dim=(2, 4)) / FP8_MAX).clamp(min=1e-12)
    q = (blocks / scale[:, :, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(e, r, c)
    return q, scale


def quantize_experts(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``[E, R, C]`` as fp8 with one scale per expert: ``(w_fp8, scale[E])``."""
    scale = (w.float().abs().amax(dim=(1, 2)) / FP8_MAX).clamp(min=1e-12)
    return (w.float() / scale[:, None, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def packed_routes(router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """``topk_ids[T, K]`` int32: each token's experts (top-k logits) in the high 16 bits, their
    renormalised weights in bf16 in the low 16. One token at a time (a lone row's softmax may be
    reduced differently from a batch's)."""
    rows = []
    for logits in router_logits.float():
        top, ids = torch.topk(logits, top_k)
        bits = torch.softmax(top, dim=0).to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
        rows.append((ids.to(torch.int32) << 16) | bits)
    return torch.stack(rows)


def renorm_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    x, router_logits, w_gate_up, w_down, _ = a
    return {
        "routing_logits": router_logits,
        "hidden_states": x,
        "gemm1_weights": _once("up_gate", w_gate_up, lambda w: up_gate(w).float()),
        "gemm2_weights": _once("down", w_down, lambda w: w.float()),
    }


def routed_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    named = renorm_inputs(a, consts)
    named["topk_ids"] = packed_routes(a[1], int(a[4]))
    return named


def block_scale_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    x, router_logits, w_gate_up, w_down, _ = a
    hidden, hidden_scale = quantize_rows(x)
    w13, w13_scale = _once("w13_blocks", w_gate_up, lambda w: quantize_blocks(up_gate(w)))
    w2, w2_scale = _once("w2_blocks", w_down, quantize_blocks)
    return {
        "routing_logits": router_logits,
        "hidden_states": hidden,
        "hidden_states_scale": hidden_scale,
        "gemm1_weights": w13,
        "gemm1_weights_scale": w13_scale,
        "gemm2_weights": w2,
        "gemm2_weights_scale": w2_scale,
    }


def _per_expert_gemm1(w_gate_up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    inter = w_gate_up.shape[1] // 2
    up, up_scale = quantize_experts(w_gate_up[:, inter:])
    gate, gate_scale = quantize_experts(w_gate_up[:, :inter])
    return torch.cat([up, gate], dim=1), up_scale, gate_scale


def per_tensor_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    x, router_logits, w_gate_up, w_down, _ = a
    w13, up_scale, gate_scale = _once("w13_experts", w_gate_up, _per_expert_gemm1)
    w2, w2_scale = _once("w2_experts", w_down, quantize_experts)
    return {
        "routing_logits": router_logits,
        # Unit-variance tokens sit well inside fp8's range: no scale, as the definition has none.
        "hidden_states": x.float().clamp(-FP8_MAX, FP8_MAX).to(FP8),
        "gemm1_weights": w13,
        "output1_scales_scalar": up_scale,
        "output1_scales_gate_scalar": gate_scale,
        "gemm2_weights": w2,
        "output2_scales_scalar": w2_scale,
    }


_SIZES = {"H": "hidden_size", "I": "intermediate_size", "top_k": "top_k"}
_WEIGHTS = ("gemm1_weights", "gemm2_weights")


def _routing_sizes(experts: str, block_scaled: bool) -> Callable[[Consts], str]:
    """The sizes rule of an interface whose experts are the const axis ``experts``: each token is routed to
    ``top_k`` distinct experts; one scale per 128 columns or rows needs sizes that are multiples of 128."""

    def refuse(consts: Consts) -> str:
        top_k, count = int(consts["top_k"]), int(consts[experts])
        if not 1 <= top_k <= count:
            return (
                f"top_k {top_k} is not between 1 and {experts} ({count}): each token is routed to top_k "
                "distinct experts"
            )
        for axis in ("hidden_size", "intermediate_size") if block_scaled else ():
            if int(consts[axis]) % BLOCK:
                return f"{axis} {consts[axis]} is not a multiple of {BLOCK}, the width of its scale blocks"
        return ""

    return refuse


def _moe(
    kind: str,
    inputs: tuple[str, ...],
    to_definition: Any,
    experts: str,
    names: tuple[Any, ...],
    block_scaled: bool = False,
) -> Adapter:
    return Adapter(
        task="moe",
        kind=kind,
        batch_axis="seq_len",
        inputs=inputs,
        outputs=("output",),
        to_definition=to_definition,
        from_definition=single,
        const_dims={"E": experts, **_SIZES},
        var_dims={"T": "seq_len"},
        argument_names=names,
        refuse_sizes=_routing_sizes(experts, block_scaled),
    )


MOE = (
    _moe(
        "renormalize routing, fp32 weights",
        ("routing_logits", "hidden_states", *_WEIGHTS),
        renorm_inputs,
        "num_experts",
        ("hidden_states", "routing_logits", None, None, None),
    ),
    _moe(
        "precomputed renormalize routing, fp32 weights",
        ("topk_ids", "hidden_states", *_WEIGHTS),
        routed_inputs,
        "num_experts",
        ("hidden_states", None, None, None, None),
    ),
    _moe(
        "renormalize routing, fp8 block scales",
        (
            "routing_logits",
            "hidden_states",
            "hidden_states_scale",
            "gemm1_weights",
            "gemm1_weights_scale",
            "gemm2_weights",
            "gemm2_weights_scale",
        ),
        block_scale_inputs,
        "num_local_experts",
        (None, "routing_logits", None, None, None),
        block_scaled=True,
    ),
    _moe(
        "renormalize routing, fp8 per-expert scales",
        (
            "routing_logits",
            "hidden_states",
            "gemm1_weights",
            "output1_scales_scalar",
            "output1_scales_gate_scalar",
            "gemm2_weights",
            "output2_scales_scalar",
        ),
        per_tensor_inputs,
        "num_experts",
        (None, "routing_logits", None, None, None),
    ),
)
