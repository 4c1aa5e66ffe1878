"""Ragged prefill baselines: torch's FlashAttention-2 varlen forward, and SDPA one sequence at a time.

``torch.nn.attention.varlen.varlen_attn`` takes the task's packed layout as it
is (``[total, H, D]`` with ``cu_seqlens``); where a torch build lacks it, the
op underneath it, ``aten._flash_attention_forward`` with ``cum_seq_q/k``, is
called directly. Both run FlashAttention-2's varlen kernel with its default
split heuristic, as a server calls it.

The per-sequence SDPA baseline (cuDNN on GPU, the math backend on CPU) slices
each sequence out of the pack and runs dense attention on it: batch-invariant
by construction, and the cost of not having a varlen kernel at all.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines import flashinfer_prefill
from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, Prepared


def varlen_kwargs(params: Iterable[str], causal: bool, gqa: bool, sm_scale: float) -> dict[str, Any]:
    """``varlen_attn``'s keywords for the task's causality, head layout and scale: causality is
    ``is_causal`` in the torch builds that have it, a ``(-1, 0)`` window in those that do not."""
    names = set(params)
    kw: dict[str, Any] = {"scale": float(sm_scale)}
    if "is_causal" in names:
        kw["is_causal"] = bool(causal)
    elif causal:
        kw["window_size"] = (-1, 0)
    if "enable_gqa" in names:
        kw["enable_gqa"] = gqa
    return kw


def varlen_call(varlen_attn: Callable[..., Any] | None) -> Callable[..., torch.Tensor]:
    """The task's signature over ``varlen_attn``, or over ``aten._flash_attention_forward``
    (``cum_seq_q/k``) when ``varlen_attn`` is None."""
    params = list(inspect.signature(varlen_attn).parameters) if varlen_attn is not None else []

    def run(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        causal: bool,
        sm_scale: float,
    ) -> torch.Tensor:
        lengths = (cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k))
        if varlen_attn is None:
            out = torch.ops.aten._flash_attention_forward(
                q, k, v, *lengths, 0.0, bool(causal), False, scale=float(sm_scale)
            )
            return out[0]  # type: ignore[no-any-return]
        kw = varlen_kwargs(params, bool(causal), q.shape[1] != k.shape[1], sm_scale)
        o: torch.Tensor = varlen_attn(q, k, v, *lengths, **kw)
        return o

    return run


def load_flash_varlen() -> Callable[..., Any]:
    if not torch.cuda.is_available():
        raise BaselineUnavailable("FlashAttention-2 varlen needs a CUDA device")
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        if not hasattr(torch.ops.aten, "_flash_attention_forward"):
            raise BaselineUnavailable(
                f"torch {torch.__version__} has neither varlen_attn nor _flash_attention_forward"
            ) from None
        run = varlen_call(None)
    else:
        run = varlen_call(varlen_attn)

    def prepare(*args: Any) -> Callable[[], torch.Tensor]:
        return lambda: run(*args)

    # FlashAttention-2 takes 16-bit inputs only: the audit skips its fp32 probe.
    return Prepared(prepare, "flash_varlen", (torch.bfloat16, torch.float16))


# The longest sequence the per-sequence baseline may run on the math backend when its pinned backend
# refuses it: such calls cost next to nothing, longer ones would be timing another backend.
SHORT_SEQUENCE = 16


def sdpa_per_sequence(backend_name: str) -> Callable[[], Callable[..., Any]]:
    """A loader of dense SDPA (pinned to ``SDPBackend.<backend_name>``) run on each packed sequence."""

    def load() -> Callable[..., Any]:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        # Short sequences the pinned backend turns down (torch's "No available kernel" on CUDA, "No
        # viable backend" on CPU) run on the math backend. The choice depends on that
        # sequence's own length only, so the baseline stays batch-invariant.
        refused: set[tuple[int, int]] = set()

        def attend_one(
            qs: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor, causal: bool, scale: float
        ) -> Any:
            gqa = qs.shape[1] != ks.shape[1]
            shape = (qs.shape[2], ks.shape[2])
            if shape not in refused:
                try:
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(
                            qs, ks, vs, is_causal=causal, scale=scale, enable_gqa=gqa
                        )
                except RuntimeError as exc:
                    refusal = any(m in str(exc) for m in ("No available kernel", "No viable backend"))
                    if not refusal or min(shape) > SHORT_SEQUENCE:
                        raise  # a long sequence on the math backend would mislabel the baseline's row

                    refused.add(shape)
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(
                    qs, ks, vs, is_causal=causal, scale=scale, enable_gqa=gqa
                )

        def run(
            q: torch.Tensor,
            k: torch.Tensor,
            v: torch.Tensor,
            cu_seqlens_q: torch.Tensor,
            cu_seqlens_k: torch.Tensor,
            max_seqlen_q: int,
            max_seqlen_k: int,
            causal: bool,
            sm_scale: float,
        ) -> torch.Tensor:
            out = torch.empty_like(q)
            bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
            for q0, q1, k0, k1 in zip(bq[:-1], bq[1:], bk[:-1], bk[1:], strict=True):
                # [S, H, D] → [1, H, S, D]; causal masks top-left in SDPA, so only Sq == Sk is exact.
                qs, ks, vs = (t.transpose(0, 1).unsqueeze(0) for t in (q[q0:q1], k[k0:k1], v[k0:k1]))
                o = attend_one(qs, ks, vs, bool(causal), float(sm_scale))
                out[q0:q1] = o.squeeze(0).transpose(0, 1)
            return out

        return run

    return load


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "attention_varlen": (
        Baseline(
            "flash varlen (torch)",
            load_flash_varlen,
            "torch",
            note=(
                "torch.nn.attention.varlen.varlen_attn (FlashAttention-2 varlen, default splits); "
                "aten._flash_attention_forward with cum_seq_q/k where varlen_attn is missing"
            ),
        ),
        Baseline(
            "cuDNN SDPA per sequence",
            sdpa_per_sequence("CUDNN_ATTENTION"),
            "torch",
            note="SDPBackend.CUDNN_ATTENTION on each sequence sliced out of the pack",
        ),
        *flashinfer_prefill.baselines("attention_varlen"),
        Baseline(
            "torch SDPA per sequence",
            sdpa_per_sequence("MATH"),
            "torch",
            ("cpu",),
            "SDPBackend.MATH on each sequence sliced out of the pack",
        ),
    ),
}
