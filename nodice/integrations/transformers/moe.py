"""Sparse MoE blocks (Qwen3-MoE's and those built like it) through nodice's gated ``moe`` kernel.

transformers' experts interface receives the tokens already routed (indices and weights), while
the ``moe`` kernel takes the router's logits and routes each token itself (softmax over the
experts in fp32, top-k, weights renormalised), then runs the grouped SwiGLU GEMMs and adds a
token's experts in slot order. So the whole block is routed: its router's projection goes
through the batch-invariant mode's ``gemm`` route, and the kernel does the rest with the experts'
own weights, whose layout is already the kernel's (``gate_up_proj[E, 2I, H]``, ``down_proj[E, H,
I]``). What differs from the stock block is where it is rounded: the stock block rounds the
routing weights to the model's dtype and adds the experts in it; the kernel keeps both in fp32.

A block is routed when it has that structure: a router with a weight ``[E, H]``, ``top_k`` and
renormalised top-k weights (``norm_topk_prob``), SwiGLU experts without biases, and no router
logits requested for an auxiliary loss. A call falls back to the block's own forward for a dtype
or device the gate did not validate, or under autograd (the kernel has no backward).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from nodice.integrations.transformers.kernels import KernelSet

TASK = "moe"


def moe_blocks(model: torch.nn.Module) -> list[tuple[str, Any]]:
    """Every module that looks like a sparse MoE block: a ``gate`` (router) and ``experts``."""
    return [
        (name, mod)
        for name, mod in model.named_modules()
        if type(mod).__name__.endswith("SparseMoeBlock") and hasattr(mod, "gate") and hasattr(mod, "experts")
    ]


def _is_silu(act: Any) -> bool:
    """Whether ``act`` computes SiLU (``nn.SiLU``, transformers' ``SiLUActivation``…), by its values."""
    if not callable(act):
        return False
    probe = torch.linspace(-6.0, 6.0, 49)
    try:
        with torch.no_grad():
            return bool(torch.allclose(act(probe), F.silu(probe), rtol=1e-6, atol=1e-7))
    except Exception:  # an activation that does not take a plain tensor is not SiLU
        return False


def block_gap(block: Any, config: Any) -> str | None:
    """Why ``block`` cannot run as nodice's ``moe`` kernel, or ``None``."""
    gate, experts = block.gate, block.experts
    weight = getattr(gate, "weight", None)
    gate_up, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not hasattr(gate, "top_k"):
        return "a router without a [experts, hidden] weight and top_k"
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return "experts without gate_up_proj / down_proj weights"
    e, h = weight.shape
    if gate_up.dim() != 3 or down.dim() != 3 or gate_up.shape[0] != e or gate_up.shape[2] != h:
        shapes = f"{tuple(gate_up.shape)} / {tuple(down.shape)}"
        return f"experts' weights {shapes} (expected [E, 2I, H] / [E, H, I])"
    if down.shape != (e, h, gate_up.shape[1] // 2) or getattr(experts, "is_transposed", False):
        return "experts' weights in another layout than [E, 2I, H] / [E, H, I]"
    if getattr(experts, "has_bias", False):
        return "experts with biases"
    if not _is_silu(getattr(experts, "act_fn", None)):
        return f"experts' activation {type(getattr(experts, 'act_fn', None)).__name__} (the kernel is SwiGLU)"
    if not getattr(gate, "norm_topk_prob", False):
        return "top-k weights not renormalised (norm_topk_prob=False; the kernel renormalises)"
    if getattr(config, "output_router_logits", False):
        return "router logits requested (output_router_logits, an auxiliary loss)"
    if h % 16 or (gate_up.shape[1] // 2) % 16:
        return f"hidden {h} and expert width {gate_up.shape[1] // 2} not multiples of 16"
    return None


@dataclass
class RoutedMoE:
    """A sparse MoE block's ``forward``: the router's projection, then the ``moe`` kernel."""

    block: Any
    original: Callable[..., Any]
    kernels: KernelSet

    def __call__(self, hidden_states: torch.Tensor) -> torch.Tensor:
        stats = self.kernels.count(TASK)
        experts, gate = self.block.experts, self.block.gate
        reason = self.kernels.refuse(TASK, hidden_states, experts.gate_up_proj, experts.down_proj)
        if reason is None and torch.is_grad_enabled() and hidden_states.requires_grad:
            reason = "autograd (the moe kernel has no backward)"
        fn = self.kernels.fn(TASK)
        if reason is not None or fn is None:
            stats.fell_back(reason or "moe: not loaded")
            out: torch.Tensor = self.original(hidden_states)
            return out
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1]).contiguous()
        logits = F.linear(x, gate.weight)  # the mode's gemm route
        y = fn(x, logits.float().contiguous(), experts.gate_up_proj, experts.down_proj, int(gate.top_k))
        stats.routed += 1
        routed: torch.Tensor = y.reshape(shape)
        return routed


def route_moe(model: torch.nn.Module, kernels: KernelSet) -> tuple[int, list[str]]:
    """Give every coverable sparse MoE block :class:`RoutedMoE` as its forward.

    Returns the number routed and, for those left as they are, ``"<module>: <why>"``.
    """
    config = getattr(model, "config", None)
    routed, kept = 0, list[str]()
    for name, block in moe_blocks(model):
        gap = block_gap(block, config)
        if gap is not None:
            kept.append(f"{name}: {gap}")
            continue
        original = getattr(block, "_nodice_original_forward", None) or block.forward
        block._nodice_original_forward = original
        block.forward = RoutedMoE(block, original, kernels)
        routed += 1
    return routed, kept
