"""Attention prefill: dense `[B, H, S, D]` attention, MHA or GQA, causal or not; a sequence is a sample."""

from __future__ import annotations

from typing import Any

import torch

from nodice.tasks._attention import (
    ATTENTION_TOLERANCES,
    attend,
    choose,
    context,
    draw_sm_scale,
    pick_layout,
)
from nodice.tasks.base import BIContext, Problem, Sample, Task, Tolerance, Workload, element_size, randn

# Queries and keys a little wider than unit variance, so that softmax rows are
# peaked the way trained attention is, not nearly uniform.
QK_SCALE = 1.5

# The SPEC's grid: 32K tokens per launch split into B sequences of S tokens,
# head dim 128, for MHA with 16 heads and GQA with 32 query heads over 8 or 4 kv heads.
_GRID_LAYOUTS = (
    ("mha16", 16, 16, ""),
    ("gqa32x8", 32, 8, "Llama-3-8B, Qwen3-8B"),
    ("gqa32x4", 32, 4, "Qwen3-30B-A3B"),
)


def _grid() -> list[Workload]:
    out = []
    for label, hq, hkv, model in _GRID_LAYOUTS:
        for causal in (True, False):
            for s in (4096, 8192, 16384, 32768):
                params = {"B": 32768 // s, "S": s, "Hq": hq, "Hkv": hkv, "D": 128, "causal": causal}
                name = f"{label}-s{s // 1024}k-{'causal' if causal else 'full'}"
                out.append(Workload(name, params, model))
    return out


_SERVING = [
    # Serving-style prompt batches of two 8B models (32 query heads, 8 kv heads, head dim 128).
    Workload(
        "llama3-8b-b16-s2k-causal",
        {"B": 16, "S": 2048, "Hq": 32, "Hkv": 8, "D": 128, "causal": True},
        "Llama-3-8B",
    ),
    Workload(
        "qwen3-8b-b64-s512-causal",
        {"B": 64, "S": 512, "Hq": 32, "Hkv": 8, "D": 128, "causal": True},
        "Qwen3-8B",
    ),
]

# Sequence lengths of a validation problem: a CPU length that is not a multiple
# of 16 exercises the tail masks; GPU lengths keep batch·heads·(S/128) under the
# SM count at batch 1 so that split-KV heuristics fire there.
_CPU_SEQ = [20, 32, 45]
_CPU_HEAD_DIM = [16, 32]
_GPU_SEQ = [200, 256, 384, 512]
_GPU_HEAD_DIM = [128]

# (variant, batch sizes with their slots). CPU batches put batch·heads (4 query
# heads) on both sides of 132, like the GPU ones (16 or 32 heads); the CPU
# group with the largest batch pins S=32 (two key tiles) to bound the
# interpreter's time, the others draw S.
_CPU_CONTEXTS: list[tuple[dict[str, Any], list[tuple[int, int]]]] = [
    ({"layout": "gqa", "causal": True, "seq_len": 32}, [(3, 2), (17, 8), (34, 0)]),
    ({"layout": "mha", "causal": False}, [(2, 0), (9, 4)]),
    ({"layout": "mqa", "causal": False}, [(5, 4)]),
    ({"layout": "mha", "causal": True}, [(4, 2)]),
]
_GPU_CONTEXTS: list[tuple[dict[str, Any], list[tuple[int, int]]]] = [
    ({"layout": "gqa", "causal": True}, [(2, 1), (3, 1), (5, 0), (8, 7), (16, 8), (33, 32)]),
    ({"layout": "mha", "causal": False}, [(2, 0), (9, 4), (24, 23)]),
    ({"layout": "gqa4", "causal": True}, [(3, 2), (12, 0)]),
    ({"layout": "mha", "causal": True}, [(4, 2), (17, 16)]),
    ({"layout": "gqa", "causal": False}, [(2, 1), (20, 10)]),
]
# The problem-shape sweep: one or two heads and short sequences, so that B·heads (2 … 257 and
# 6 … 280 query heads) and the batch's tokens (B·S: 256 … 32896 and 600 … 28000) cross the SM
# count, powers of two and one wave between the sweep's batches, which the real head layouts at
# batch 1 are already past.
_GPU_SWEEP: list[tuple[dict[str, Any], list[tuple[int, int]]]] = [
    (
        {"layout": "h1", "causal": False, "seq_len": 128},
        [(2, 1), (5, 4), (17, 16), (33, 0), (65, 64), (133, 66), (257, 128)],
    ),
    ({"layout": "h2", "causal": True, "seq_len": 200}, [(3, 2), (9, 8), (33, 16), (67, 0), (140, 139)]),
]
# On CPU: B·heads 2 … 133 and 3 … 80, tokens 32 … 2128 and 60 … 800.
_CPU_SWEEP: list[tuple[dict[str, Any], list[tuple[int, int]]]] = [
    ({"layout": "h1", "causal": False, "seq_len": 16}, [(2, 1), (9, 8), (33, 16), (65, 0), (133, 66)]),
    ({"layout": "h2", "causal": True, "seq_len": 20}, [(3, 2), (17, 8), (40, 39)]),
]


class AttentionPrefill(Task):
    name = "attention_prefill"
    family = "attention"
    signature = (
        "kernel(q[B,Hq,S,D], k[B,Hkv,S,D], v[B,Hkv,S,D], causal: bool, sm_scale: float) "
        "-> o[B,Hq,S,D] bf16; Hq % Hkv == 0"
    )
    sample_unit = "one sequence"
    output_names = ("o",)
    arity = 5

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Head layout, causality, S and D for one batch; ``variant`` pins any of them."""
        cuda = device.type == "cuda"
        layout = pick_layout(gen, device, variant.get("layout"))
        causal = bool(variant["causal"]) if "causal" in variant else bool(choose(gen, [True, False]))
        seq = int(variant.get("seq_len") or choose(gen, _GPU_SEQ if cuda else _CPU_SEQ))
        head_dim = int(variant.get("head_dim") or choose(gen, _GPU_HEAD_DIM if cuda else _CPU_HEAD_DIM))
        dims = {
            "layout": layout.name,
            "Hq": layout.q_heads,
            "Hkv": layout.kv_heads,
            "S": seq,
            "D": head_dim,
            "causal": causal,
        }
        return Problem(device, dtype, dims, {"causal": causal, "sm_scale": draw_sm_scale(gen, head_dim)})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        d = problem.dims
        q = randn((d["Hq"], d["S"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        k = randn((d["Hkv"], d["S"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        v = randn((d["Hkv"], d["S"], d["D"]), gen, problem.device, problem.dtype)
        return Sample({"q": q, "k": k, "v": v})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        q, k, v = (torch.stack([s.tensors[n] for s in samples]).contiguous() for n in ("q", "k", "v"))
        return (q, k, v, problem.shared["causal"], problem.shared["sm_scale"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        q, k, v, causal, sm_scale = args
        # One sequence at a time; attend bounds its own scratch by chunks of heads and queries.
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        for b in range(q.shape[0]):
            out[b] = attend(q[b], k[b], v[b], bool(causal), float(sm_scale), out_dtype=q.dtype)
        return out

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return ATTENTION_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        # Each trial draws its own layout, causality, S and D.
        return [1, 2, 5] if device.type == "cpu" else [1, 3, 8, 24]

    def contexts(self, device: torch.device) -> list[BIContext]:
        out = []
        plan = _GPU_CONTEXTS + _GPU_SWEEP if device.type == "cuda" else _CPU_CONTEXTS + _CPU_SWEEP
        for variant, batches in plan:
            label = f"{variant['layout']},{'causal' if variant['causal'] else 'full'}"
            out += [context(label, b, pos, variant) for b, pos in batches]
        return out

    def witnesses(self, device: torch.device) -> int:
        # Every variant group pays two batch-1 calls per compared sample: few under the interpreter.
        return 2 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _grid() + list(_SERVING)

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-gqa-causal", {"B": 2, "S": 64, "Hq": 4, "Hkv": 2, "D": 32, "causal": True}),
            Workload("cpu-mha-full", {"B": 2, "S": 64, "Hq": 4, "Hkv": 4, "D": 32, "causal": False}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        q = randn((p["B"], p["Hq"], p["S"], p["D"]), gen, device, dtype, QK_SCALE)
        k = randn((p["B"], p["Hkv"], p["S"], p["D"]), gen, device, dtype, QK_SCALE)
        v = randn((p["B"], p["Hkv"], p["S"], p["D"]), gen, device, dtype)
        return (q, k, v, p["causal"], p["D"] ** -0.5)

    def flops(self, workload: Workload) -> float:
        p = workload.params
        full = 4.0 * p["B"] * p["Hq"] * p["S"] ** 2 * p["D"]
        return full / 2 if p["causal"] else full

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        p = workload.params
        per_token = 2 * p["Hq"] * p["D"] + 2 * p["Hkv"] * p["D"]  # q and o, k and v
        return float(p["B"] * p["S"] * per_token * element_size(dtype))


TASK = AttentionPrefill()
