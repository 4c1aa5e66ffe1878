"""Ragged (varlen) prefill attention: sequences of different lengths packed into one launch.

The layout is FlashAttention's ``flash_attn_varlen_func``: the batch's tokens
are packed back to back along the first axis (``q[total_q, Hq, D]``,
``k/v[total_k, Hkv, D]``) and ``cu_seqlens_q/k[B+1]`` (int32) hold where each
sequence starts; ``max_seqlen_q/k`` are the longest sequence's lengths. A
sample is one sequence (its rows of q, k and v), so what must not change its
output bits is everything varlen adds over dense prefill: where in the pack it
sits (its row offset), how long its batchmates are (one token to many times
its own length), and how many tokens the whole pack holds. ``max_seqlen_*`` and
``total_*`` are batch quantities: a kernel that sizes a tile, a split or a code
path from them is not batch-invariant.

Each sample's queries and keys have the same length (prompt prefill, no cached
prefix); the reference and the signature still follow FlashAttention for
``Sk ≥ Sq`` (causal aligned bottom-right).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch

from nodice.tasks._attention import (
    ATTENTION_TOLERANCES,
    PackedRows,
    attend,
    choose,
    context,
    draw_sm_scale,
    pick_layout,
    randint,
)
from nodice.tasks.base import (
    BIContext,
    Problem,
    Sample,
    Task,
    Tolerance,
    Workload,
    element_size,
    randn,
)

QK_SCALE = 1.5

# Serving-style packed prefill batches: a few long prompts beside many short ones.
_MODELS = (
    ("llama3-8b", 32, 8, "Llama-3-8B"),
    ("qwen3-8b", 32, 8, "Qwen3-8B"),
    ("qwen3-32b", 64, 8, "Qwen3-32B"),
)
_MIXES: dict[str, tuple[int, ...]] = {
    # 16K tokens: one 8K prompt, a 4K one and 32 short follow-ups of 128.
    "mix16k": (8192, 4096) + (128,) * 32,
    # 32K tokens in 64 requests of 1 … 2K tokens (a decreasing spread, as a scheduler admits them).
    "spread32k": tuple(max(1, 2048 - 32 * i) for i in range(64)),
    # One 32K prompt alone: the dense limit of the packed layout.
    "long32k": (32768,),
}


def _workloads() -> list[Workload]:
    out = []
    for label, hq, hkv, model in _MODELS:
        for mix, lengths in _MIXES.items():
            if label == "qwen3-8b" and mix != "spread32k":
                continue  # same heads as Llama-3-8B: one shape is enough
            params = {"lengths": list(lengths), "Hq": hq, "Hkv": hkv, "D": 128, "causal": True}
            out.append(Workload(f"{label}-{mix}-causal", params, model))
    return out


# CPU: tiny heads, target lengths that straddle 16/32-row tiles; GPU: targets
# of a few hundred tokens that straddle 64/128-row tiles.
_CPU_TARGETS = (9, 40)
_CPU_HEAD_DIM = [16, 32]
_GPU_TARGETS = (100, 700)
_GPU_HEAD_DIM = [128]

# (variant, [(batch, slot, batchmate length range)]). The batchmates run from a
# single token to many times the target; the slot puts the target first,
# in the middle and last of the pack; B·heads crosses 132 on both devices.
_Plan = list[tuple[dict[str, Any], list[tuple[int, int, tuple[int, int]]]]]
_CPU_CONTEXTS: _Plan = [
    (
        # The big batch early: a split or a path chosen while B·heads < 132 ends there.
        {"layout": "gqa", "causal": True},
        [(2, 1, (1, 1)), (34, 33, (1, 6)), (5, 0, (60, 160)), (9, 4, (1, 120))],
    ),
    ({"layout": "mha", "causal": True}, [(3, 2, (1, 200)), (6, 0, (1, 4))]),
    ({"layout": "mqa", "causal": False}, [(4, 1, (1, 90))]),
    # The problem-shape sweep: one or two heads and short mates, so that B·heads (2 … 133) and the
    # pack's tokens (tens … ~1000) cross the SM count and powers of two between the batches.
    (
        {"layout": "h1", "causal": True},
        [(2, 1, (1, 8)), (17, 8, (1, 24)), (65, 0, (1, 8)), (133, 66, (1, 4))],
    ),
    ({"layout": "h2", "causal": True}, [(3, 2, (1, 16)), (40, 39, (1, 12))]),
]
_GPU_CONTEXTS: _Plan = [
    (
        {"layout": "gqa", "causal": True},
        [(2, 1, (1, 1)), (3, 0, (4096, 8192)), (8, 7, (1, 2048)), (17, 8, (1, 512)), (64, 63, (1, 256))],
    ),
    ({"layout": "mha", "causal": True}, [(3, 1, (1, 16)), (9, 4, (1000, 4000)), (40, 0, (1, 512))]),
    ({"layout": "gqa4", "causal": False}, [(5, 4, (1, 2048)), (33, 16, (1, 300))]),
    # The sweep: B·heads 2 … 257, the pack's tokens from a few hundred to ~40K.
    (
        {"layout": "h1", "causal": True},
        [(2, 1, (1, 64)), (9, 8, (1, 512)), (33, 16, (1, 256)), (133, 66, (1, 128)), (257, 0, (1, 64))],
    ),
    ({"layout": "h2", "causal": True}, [(5, 2, (1, 1024)), (67, 0, (1, 300)), (140, 139, (1, 32))]),
]


def cu_seqlens(lengths: list[int], device: torch.device) -> torch.Tensor:
    """``[0, l0, l0+l1, …]`` as int32: where each packed sequence starts, and the total."""
    out = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    out[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0).to(torch.int32)
    return out.to(device)


def unpack(cu: torch.Tensor) -> list[tuple[int, int]]:
    """(start, end) row range of each packed sequence."""
    return list(pairwise(cu.tolist()))


class AttentionVarlen(PackedRows, Task):
    name = "attention_varlen"
    family = "attention"
    signature = (
        "kernel(q[total_q,Hq,D], k[total_k,Hkv,D], v[total_k,Hkv,D], cu_seqlens_q[B+1] int32, "
        "cu_seqlens_k[B+1] int32, max_seqlen_q: int, max_seqlen_k: int, causal: bool, sm_scale: float) "
        "-> o[total_q,Hq,D] bf16; sequence i is rows cu_seqlens[i]:cu_seqlens[i+1]; Hq % Hkv == 0"
    )
    sample_unit = (
        "one sequence (its q/k/v rows); its place in the pack and its batchmates' lengths are context"
    )
    output_names = ("o",)
    arity = 9

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Head layout, causality, D and the length range of sequences drawn without hints."""
        cuda = device.type == "cuda"
        layout = pick_layout(gen, device, variant.get("layout"))
        causal = bool(variant["causal"]) if "causal" in variant else bool(choose(gen, [True, False]))
        head_dim = int(variant.get("head_dim") or choose(gen, _GPU_HEAD_DIM if cuda else _CPU_HEAD_DIM))
        dims = {
            "layout": layout.name,
            "Hq": layout.q_heads,
            "Hkv": layout.kv_heads,
            "D": head_dim,
            "causal": causal,
            "lengths": tuple(variant.get("lengths") or (_GPU_TARGETS if cuda else _CPU_TARGETS)),
        }
        return Problem(device, dtype, dims, {"causal": causal, "sm_scale": draw_sm_scale(gen, head_dim)})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """One sequence; ``mate_len=(lo, hi)`` draws its length from that range instead of the problem's."""
        d = problem.dims
        lo, hi = hints.get("mate_len") or d["lengths"]
        n = randint(gen, int(lo), int(hi))
        q = randn((n, d["Hq"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        k = randn((n, d["Hkv"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        v = randn((n, d["Hkv"], d["D"]), gen, problem.device, problem.dtype)
        return Sample({"q": q, "k": k, "v": v}, {"length": n})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        q, k, v = (torch.cat([s.tensors[n] for s in samples]).contiguous() for n in ("q", "k", "v"))
        lengths = [int(s.tensors["q"].shape[0]) for s in samples]
        cu = cu_seqlens(lengths, problem.device)
        longest = max(lengths)
        # Two tensors, as a server passes them: a kernel may not assume they alias.
        return (
            q,
            k,
            v,
            cu,
            cu.clone(),
            longest,
            longest,
            problem.shared["causal"],
            problem.shared["sm_scale"],
        )

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        q, k, v, cu_q, cu_k, _, _, causal, sm_scale = args
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if q.device.type == "meta":  # output spec only: the offsets are data
            return out
        for (q0, q1), (k0, k1) in zip(unpack(cu_q), unpack(cu_k), strict=True):
            o = attend(
                q[q0:q1].transpose(0, 1),
                k[k0:k1].transpose(0, 1),
                v[k0:k1].transpose(0, 1),
                bool(causal),
                float(sm_scale),
                out_dtype=q.dtype,
            )
            out[q0:q1] = o.transpose(0, 1)
        return out

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return ATTENTION_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 6] if device.type == "cpu" else [1, 7, 48]

    def contexts(self, device: torch.device) -> list[BIContext]:
        out = []
        for variant, batches in _GPU_CONTEXTS if device.type == "cuda" else _CPU_CONTEXTS:
            label = f"{variant['layout']},{'causal' if variant['causal'] else 'full'}"
            out += [context(label, b, pos, variant, mate_len=mates) for b, pos, mates in batches]
        return out

    def witnesses(self, device: torch.device) -> int:
        # Every variant group pays two batch-1 calls per compared sample: few under the interpreter.
        return 2 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _workloads()

    def small_workloads(self) -> list[Workload]:
        return [
            Workload(
                "cpu-gqa-mixed", {"lengths": [96, 7, 33, 1, 20], "Hq": 4, "Hkv": 2, "D": 32, "causal": True}
            ),
            Workload("cpu-mha-short", {"lengths": [16] * 6, "Hq": 4, "Hkv": 4, "D": 32, "causal": True}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        lengths = [int(n) for n in p["lengths"]]
        total = sum(lengths)
        q = randn((total, p["Hq"], p["D"]), gen, device, dtype, QK_SCALE)
        k = randn((total, p["Hkv"], p["D"]), gen, device, dtype, QK_SCALE)
        v = randn((total, p["Hkv"], p["D"]), gen, device, dtype)
        cu = cu_seqlens(lengths, device)
        return (q, k, v, cu, cu.clone(), max(lengths), max(lengths), p["causal"], p["D"] ** -0.5)

    def flops(self, workload: Workload) -> float:
        """4·Hq·S²·D per sequence, halved when causal (attention_prefill's count, so the two compare)."""
        p = workload.params
        pairs = sum(n * n / 2 if p["causal"] else n * n for n in p["lengths"])
        return 4.0 * p["Hq"] * p["D"] * pairs

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        p = workload.params
        per_token = 2 * p["Hq"] * p["D"] + 2 * p["Hkv"] * p["D"]  # q and o, k and v
        offsets = 2 * (len(p["lengths"]) + 1) * 4  # the two int32 cu_seqlens
        return float(sum(p["lengths"]) * per_token * element_size(dtype) + offsets)

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        for w in out["workloads"]:  # a length list per workload is too long for a table: summarise it
            lengths = w.pop("lengths")
            w.update(B=len(lengths), total_tokens=sum(lengths), max_seqlen=max(lengths))
        return out


TASK = AttentionVarlen()
