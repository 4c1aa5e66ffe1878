"""FlashInfer's batch prefill over a ragged (packed) batch, for dense and varlen prefill.

``BatchPrefillWithRaggedKVCacheWrapper`` takes the batch packed along the
token axis (``q[total_q, Hq, D]``, ``k/v[total_k, Hkv, D]``, the NHD layout)
with ``qo_indptr``/``kv_indptr[B+1]`` saying where each sequence starts: the
``attention_varlen`` task's layout as it is (``cu_seqlens_q/k`` are the
indptrs), and ``attention_prefill``'s ``[B, H, S, D]`` once transposed to
``[B, S, H, D]`` and flattened (every sequence ``S`` long). ``plan()`` is where
its scheduler looks at the batch: it picks the query tile from the batch's
average query length and, on the FA2 backend, a KV split size searched over
the batch unless ``fixed_split_size`` pins it. A server runs ``plan()`` once
per step, outside the layers' attention calls, so the conversion and the plan
run in ``prepare``; the timed closure is ``run()``.

Two configurations: the wrapper as a server builds it (``backend="auto"``,
FA3 on Hopper, FA2 elsewhere, its own schedule), and the deterministic
setting (FA2 with ``fixed_split_size``, the knob FlashInfer documents for
batch-invariant outputs). Both take 16-bit inputs on CUDA only; the
conversions below are plain tensor functions, tested on CPU against the
tasks' references with a torch stand-in for the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from nodice.measuring.baselines.attention_decode import FLASHINFER, HALF_DTYPES, plan_accepts
from nodice.measuring.baselines.spec import Baseline, BaselineUnavailable, Prepared, require

# Tokens per KV split in the deterministic configuration (the ragged KV has pages of one token).
SPLIT_TOKENS = 4096
# The float workspace holds split partial outputs and their LSEs: at least 1 GiB, as for the decode
# wrapper, and more where a fixed split cuts long sequences into many parts (``workspace_bytes``).
WORKSPACE_BYTES = 1 << 30
# FlashInfer pads each request's queries to its query tile (at most 128 rows) when it lays out the
# split partials; the margin covers its alignment of each buffer.
QUERY_TILE = 128
WORKSPACE_MARGIN_BYTES = 64 << 20
# Head dims FlashInfer's prefill kernels are instantiated for.
HEAD_DIMS = (64, 128, 256)

Configuration = dict[str, Any]
# The wrapper's constructor keywords and the plan() keywords of each configuration.
CONFIGURATIONS: dict[str, tuple[Configuration, Configuration]] = {
    "auto": ({"backend": "auto"}, {}),
    "fixed": ({"backend": "fa2"}, {"fixed_split_size": SPLIT_TOKENS}),
}


@dataclass(frozen=True)
class RaggedBatch:
    """One prefill batch in FlashInfer's ragged layout."""

    q: torch.Tensor  # [total_q, Hq, D]
    k: torch.Tensor  # [total_k, Hkv, D]
    v: torch.Tensor  # [total_k, Hkv, D]
    qo_indptr: torch.Tensor  # [B+1] int32
    kv_indptr: torch.Tensor  # [B+1] int32
    causal: bool
    sm_scale: float


def refusal(q: torch.Tensor, k: torch.Tensor) -> str:
    """Why FlashInfer's prefill cannot take these tensors ("" when it can)."""
    if q.dtype not in HALF_DTYPES or k.dtype != q.dtype:
        return f"FlashInfer prefill takes bfloat16 or float16 q/k/v, not {q.dtype}/{k.dtype}"
    if q.shape[-1] not in HEAD_DIMS:
        return f"FlashInfer prefill has no kernels for head dim {q.shape[-1]} (only {HEAD_DIMS})"
    if q.device.type != "cuda":
        return f"FlashInfer prefill runs on CUDA tensors, not {q.device.type}"
    return ""


def ragged_from_dense(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> RaggedBatch:
    """``attention_prefill``'s ``[B, H, S, D]`` tensors → the ragged batch of B sequences of S tokens."""
    batch, _, seq, _ = q.shape
    q_rows, k_rows, v_rows = (
        t.transpose(1, 2).reshape(batch * seq, t.shape[1], t.shape[3]) for t in (q, k, v)
    )
    indptr = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32, device=q.device)
    return RaggedBatch(q_rows, k_rows, v_rows, indptr, indptr, bool(causal), float(sm_scale))


def dense_from_ragged(o: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
    """FlashInfer's ``[B·S, Hq, D]`` output → ``attention_prefill``'s ``[B, Hq, S, D]`` (a view)."""
    return o.view(batch, seq, o.shape[1], o.shape[2]).transpose(1, 2)


def ragged_from_varlen(*args: Any) -> RaggedBatch:
    """``attention_varlen``'s arguments → the ragged batch (the packed tensors as they are)."""
    q, k, v, cu_seqlens_q, cu_seqlens_k, _, _, causal, sm_scale = args
    return RaggedBatch(
        q, k, v, cu_seqlens_q.to(torch.int32), cu_seqlens_k.to(torch.int32), bool(causal), float(sm_scale)
    )


def workspace_bytes(batch: RaggedBatch, split_tokens: int | None) -> int:
    """The float workspace ``batch`` needs; never less than :data:`WORKSPACE_BYTES`.

    FA2's ``plan()`` packs a request's query heads of one KV head into its query rows
    (``qo_len · Hq/Hkv`` rows, padded to the query tile) and, with a fixed split size, keeps
    ``ceil(kv_len / split)`` fp32 partial outputs and LSEs per packed row for each of the
    ``Hq`` heads (FlashInfer's ``PrefillPlan``: ``num_qo_heads · padded_batch_size · cta_tile_q``
    rows), and none where no request is split. A 1 GiB buffer overflowed from 16K-token sequences
    on; a size without the packing factor still overflowed on the GQA rows (8.7 GB at 16K tokens,
    32 query heads over 8)."""
    if not split_tokens:
        return WORKSPACE_BYTES
    kv_lens = (batch.kv_indptr[1:] - batch.kv_indptr[:-1]).tolist()
    qo_lens = (batch.qo_indptr[1:] - batch.qo_indptr[:-1]).tolist()
    if all(kv <= split_tokens for kv in kv_lens):
        return WORKSPACE_BYTES  # no request is split: plan() keeps no partials
    heads, head_dim = batch.q.shape[1], batch.q.shape[2]
    group = max(1, heads // max(1, batch.k.shape[1]))
    rows = 0
    for qo, kv in zip(qo_lens, kv_lens, strict=True):
        tiles = -(-(qo * group) // QUERY_TILE)
        rows += tiles * QUERY_TILE * max(1, -(-kv // split_tokens))
    need = rows * heads * (head_dim + 1) * 4
    return max(WORKSPACE_BYTES, need + WORKSPACE_MARGIN_BYTES)


def plan_arguments(batch: RaggedBatch, extra: Configuration) -> tuple[tuple[Any, ...], Configuration]:
    """``BatchPrefillWithRaggedKVCacheWrapper.plan``'s arguments for ``batch`` (``extra``: its pins)."""
    positional = (batch.qo_indptr, batch.kv_indptr, batch.q.shape[1], batch.k.shape[1], batch.q.shape[2])
    keywords = {
        "causal": batch.causal,
        "sm_scale": batch.sm_scale,
        "q_data_type": batch.q.dtype,
        "kv_data_type": batch.k.dtype,
        **extra,
    }
    return positional, keywords


# Plans a ragged batch once and returns the closure that attends it (FlashInfer's plan() and run()).
RaggedAttention = Callable[[RaggedBatch], Callable[[], torch.Tensor]]


def dense_prefill(attend: RaggedAttention, name: str) -> Prepared:
    """``attention_prefill``'s signature over a ragged attention."""

    def prepare(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
    ) -> Callable[[], torch.Tensor]:
        batch, _, seq, _ = q.shape
        run = attend(ragged_from_dense(q, k, v, causal, sm_scale))
        return lambda: dense_from_ragged(run(), batch, seq)

    return Prepared(prepare, name, HALF_DTYPES)


def varlen_prefill(attend: RaggedAttention, name: str) -> Prepared:
    """``attention_varlen``'s signature over a ragged attention: the output is already packed."""

    def prepare(*args: Any) -> Callable[[], torch.Tensor]:
        return attend(ragged_from_varlen(*args))

    return Prepared(prepare, name, HALF_DTYPES)


def flashinfer_ragged(configuration: str) -> RaggedAttention:
    """FlashInfer's ragged prefill in one of :data:`CONFIGURATIONS`; unavailable here says why."""
    wrapper_cls = require("flashinfer.prefill", FLASHINFER).BatchPrefillWithRaggedKVCacheWrapper
    if not torch.cuda.is_available():
        raise BaselineUnavailable(f"{FLASHINFER}: its prefill kernels need a CUDA device")
    init, pins = CONFIGURATIONS[configuration]
    for knob in pins:
        if not plan_accepts(wrapper_cls, knob):
            raise BaselineUnavailable(f"{FLASHINFER}: this version's prefill plan() has no {knob}")
    workspaces: dict[torch.device, torch.Tensor] = {}

    def attend(batch: RaggedBatch) -> Callable[[], torch.Tensor]:
        why = refusal(batch.q, batch.k)
        if why:
            raise ValueError(why)
        device = batch.q.device
        need = workspace_bytes(batch, pins.get("fixed_split_size"))
        if device not in workspaces or workspaces[device].numel() < need:
            # Earlier wrappers keep the smaller buffer they were built on alive as long as they live.
            workspaces[device] = torch.zeros(need, dtype=torch.uint8, device=device)
        # A wrapper holds one plan: a fresh one per prepared batch keeps earlier closures valid.
        wrapper = wrapper_cls(workspaces[device], "NHD", **init)
        positional, keywords = plan_arguments(batch, pins)
        wrapper.plan(*positional, **keywords)

        def call() -> torch.Tensor:
            out: torch.Tensor = wrapper.run(batch.q, batch.k, batch.v)
            return out

        return call

    return attend


def loader(task: str, configuration: str) -> Callable[[], Callable[..., Any]]:
    """A loader of FlashInfer's ragged prefill for ``attention_prefill`` or ``attention_varlen``."""
    adapt = dense_prefill if task == "attention_prefill" else varlen_prefill

    def load() -> Callable[..., Any]:
        return adapt(flashinfer_ragged(configuration), f"flashinfer_prefill_{configuration}")

    return load


_SETUP = "BatchPrefillWithRaggedKVCacheWrapper(NHD"
_NOTES = {
    "auto": (
        f"{_SETUP}, backend='auto': FA3 on Hopper), default plan(): its own query tile and KV split "
        "from the batch"
    ),
    "fixed": f"{_SETUP}, backend='fa2'), plan(fixed_split_size={SPLIT_TOKENS} tokens)",
}
_LAYOUT = {
    "attention_prefill": "[B,H,S,D] packed to [B·S,H,D], indptr 0,S,2S,…, transposes and plan() in prepare",
    "attention_varlen": "the packed tensors as they are, indptrs = cu_seqlens, plan() in prepare",
}


def baselines(task: str) -> tuple[Baseline, ...]:
    """The FlashInfer prefill baselines of ``task`` (its task module lists them with its others)."""
    return (
        Baseline(
            "FlashInfer batch prefill",
            loader(task, "auto"),
            FLASHINFER,
            note=f"{_NOTES['auto']}; {_LAYOUT[task]}",
        ),
        Baseline(
            "FlashInfer batch prefill (fixed split)",
            loader(task, "fixed"),
            FLASHINFER,
            note=f"{_NOTES['fixed']}; {_LAYOUT[task]}",
        ),
    )
