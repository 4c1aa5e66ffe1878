"""Attention decode over a paged KV cache: one request (query, pages, length) is one sample.

The pool ``[P, page, Hkv, D]`` is shared by the batch and its pages are placed
at random: the same request lands in different pool slots in different
batches, and pool slots that belong to nobody (and the tail of each request's
last page) hold random junk, so a kernel that reads past a request's length is
wrong and one whose result depends on where the pages sit is not invariant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from nodice.tasks._attention import (
    ATTENTION_TOLERANCES,
    SWEEP_LAYOUTS,
    attend,
    cdiv,
    choose,
    context,
    draw_sm_scale,
    pick_layout,
    randint,
    scatter_pages,
)
from nodice.tasks.base import BIContext, Problem, Sample, Task, Tolerance, Workload, element_size, randn

QK_SCALE = 1.5
PAGE_SIZE = 16

_LLAMA = ("llama3-8b", 32, 8, "Llama-3-8B, Qwen3-8B")
_QWEN_MOE = ("qwen3-30b-a3b", 32, 4, "Qwen3-30B-A3B")
_QWEN_32B = ("qwen3-32b", 64, 8, "Qwen3-32B")


def _decode_workloads() -> list[Workload]:
    out = []
    shapes = [(_LLAMA, b, kv) for b in (1, 8, 32, 128) for kv in (1024, 8192, 32768)]
    shapes += [(_QWEN_MOE, b, kv) for b, kv in ((8, 8192), (32, 8192), (128, 32768))]
    shapes += [(_QWEN_32B, b, kv) for b, kv in ((32, 8192), (128, 8192))]
    for (label, hq, hkv, model), b, kv in shapes:
        params = {"B": b, "L": kv, "Hq": hq, "Hkv": hkv, "D": 128, "page": PAGE_SIZE}
        out.append(Workload(f"{label}-b{b}-kv{kv // 1024}k", params, model))
    return out


@dataclass(frozen=True)
class _Sizes:
    page: int
    head_dims: tuple[int, ...]
    lengths: tuple[int, int]  # range of request lengths drawn without hints


# CPU: tiny heads, pages of 8 so that even short requests span several (their
# placement matters), lengths that straddle the kernels' tiles.
_CPU = _Sizes(page=8, head_dims=(16, 32), lengths=(17, 64))
_GPU = _Sizes(page=PAGE_SIZE, head_dims=(128,), lengths=(200, 3000))

# (variant, [(batch, slot, batchmate length range)]). The batchmates run from a
# single token to far longer than the target; batch·q-heads crosses 132 on both
# devices. On CPU the big and the long batches use the layouts with the fewest
# kv heads: the seed launches a program per (request, kv head, split), and the
# interpreter pays for each.
_Plan = list[tuple[dict[str, Any], list[tuple[int, int, tuple[int, int]]]]]
_CPU_CONTEXTS: _Plan = [
    ({"layout": "mqa"}, [(5, 4, (1, 1)), (6, 0, (120, 200)), (9, 4, (1, 160)), (34, 33, (1, 16))]),
    ({"layout": "gqa"}, [(5, 2, (1, 4)), (7, 3, (100, 180))]),
    ({"layout": "mha"}, [(6, 5, (1, 200))]),
    # The problem-shape sweep (one head): B·heads 4 … 133, the batch's tokens from tens to ~1500.
    (
        {"layout": "h1", "lengths": (9, 40)},
        [(4, 3, (1, 8)), (17, 8, (1, 48)), (40, 39, (1, 8)), (133, 66, (1, 8))],
    ),
]
_GPU_CONTEXTS: _Plan = [
    (
        {"layout": "gqa"},
        [
            (2, 1, (1, 1)),
            (8, 0, (8192, 16384)),
            (17, 8, (1, 8192)),
            (64, 63, (1, 2048)),
            (128, 64, (1, 1024)),
        ],
    ),
    # Short targets: tiles sized from the longest request show up here.
    ({"layout": "mha", "lengths": (1, 100)}, [(3, 2, (1, 4)), (9, 4, (1000, 4000)), (40, 0, (1, 512))]),
    ({"layout": "gqa4"}, [(5, 4, (1, 16384)), (33, 16, (1, 2048))]),
    # The problem-shape sweep: one kv head and short requests, so that B·heads (2 … 257) and the
    # batch's tokens cross the SM count and powers of two between these batches.
    (
        {"layout": "h1", "lengths": (16, 300)},
        [(2, 1, (1, 64)), (9, 8, (1, 512)), (33, 16, (1, 256)), (133, 66, (1, 128)), (257, 0, (1, 64))],
    ),
]


class AttentionDecode(Task):
    name = "attention_decode"
    family = "attention"
    unit = "GB/s"
    signature = (
        "kernel(q[B,Hq,D], k_cache[P,page,Hkv,D], v_cache[P,page,Hkv,D], block_table[B,maxp] int32, "
        "seq_lens[B] int32, sm_scale: float) -> o[B,Hq,D] bf16; request i attends to its first "
        "seq_lens[i] tokens, stored in pages block_table[i, :]"
    )
    sample_unit = "one request (its query, its pages, its length); page placement is part of the context"
    output_names = ("o",)
    arity = 6

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Head layout, D, page size and the length range of requests drawn without hints."""
        sizes = _GPU if device.type == "cuda" else _CPU
        layout = pick_layout(gen, device, variant.get("layout"))
        head_dim = int(variant.get("head_dim") or choose(gen, list(sizes.head_dims)))
        dims = {
            "layout": layout.name,
            "Hq": layout.q_heads,
            "Hkv": layout.kv_heads,
            "D": head_dim,
            "page": int(variant.get("page") or sizes.page),
            "lengths": tuple(variant.get("lengths") or sizes.lengths),
        }
        return Problem(device, dtype, dims, {"sm_scale": draw_sm_scale(gen, head_dim)})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """One request; ``mate_len=(lo, hi)`` draws its length from that range instead of the problem's."""
        d = problem.dims
        lo, hi = hints.get("mate_len") or d["lengths"]
        length = randint(gen, int(lo), int(hi))
        q = randn((d["Hq"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        k = randn((length, d["Hkv"], d["D"]), gen, problem.device, problem.dtype, scale=QK_SCALE)
        v = randn((length, d["Hkv"], d["D"]), gen, problem.device, problem.dtype)
        return Sample({"q": q, "k": k, "v": v}, {"length": length})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        """Scatter each request's tokens over pool pages drawn at random; junk everywhere else."""
        d, dev, dtype = problem.dims, problem.device, problem.dtype
        page = d["page"]
        lengths = [int(s.meta["length"]) for s in samples]
        pool, table, rows = scatter_pages(gen, lengths, page, dev)
        k_cache = randn((pool, page, d["Hkv"], d["D"]), gen, dev, dtype, scale=3.0)
        v_cache = randn((pool, page, d["Hkv"], d["D"]), gen, dev, dtype, scale=3.0)
        k_cache.view(pool * page, d["Hkv"], d["D"])[rows] = torch.cat([s.tensors["k"] for s in samples])
        v_cache.view(pool * page, d["Hkv"], d["D"])[rows] = torch.cat([s.tensors["v"] for s in samples])
        q = torch.stack([s.tensors["q"] for s in samples]).contiguous()
        seq_lens = torch.tensor(lengths, dtype=torch.int32, device=dev)
        return (q, k_cache, v_cache, table, seq_lens, problem.shared["sm_scale"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        q, k_cache, v_cache, block_table, seq_lens, sm_scale = args
        page, hkv, head_dim = k_cache.shape[1], k_cache.shape[2], k_cache.shape[3]
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if q.device.type == "meta":  # output spec only: the lengths are data
            return out
        for i, n in enumerate(seq_lens.tolist()):
            pages = block_table[i, : cdiv(n, page)].long()
            k = k_cache[pages].reshape(-1, hkv, head_dim)[:n].transpose(0, 1)
            v = v_cache[pages].reshape(-1, hkv, head_dim)[:n].transpose(0, 1)
            out[i] = attend(q[i].unsqueeze(1), k, v, False, float(sm_scale), out_dtype=q.dtype).squeeze(1)
        return out

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return ATTENTION_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 8] if device.type == "cpu" else [1, 7, 64, 160]

    def contexts(self, device: torch.device) -> list[BIContext]:
        out = []
        for variant, batches in _GPU_CONTEXTS if device.type == "cuda" else _CPU_CONTEXTS:
            short = "lengths" in variant and variant["layout"] not in SWEEP_LAYOUTS
            label = variant["layout"] + (",short-target" if short else "")
            out += [context(label, b, pos, variant, mate_len=mates) for b, pos, mates in batches]
        return out

    def witnesses(self, device: torch.device) -> int:
        # Every variant group pays two batch-1 calls per compared sample: few under the interpreter.
        return 2 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _decode_workloads()

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-gqa", {"B": 4, "L": 64, "Hq": 4, "Hkv": 2, "D": 32, "page": 8}),
            Workload("cpu-mha-long", {"B": 2, "L": 200, "Hq": 4, "Hkv": 4, "D": 32, "page": 8}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        b, length, page = p["B"], p["L"], p["page"]
        per_request = cdiv(length, page)
        pool = b * per_request
        q = randn((b, p["Hq"], p["D"]), gen, device, dtype, QK_SCALE)
        k_cache = randn((pool, page, p["Hkv"], p["D"]), gen, device, dtype, QK_SCALE)
        v_cache = randn((pool, page, p["Hkv"], p["D"]), gen, device, dtype)
        # Pages scattered over the pool, as after a while of serving.
        table = torch.randperm(pool, generator=gen).view(b, per_request).to(device=device, dtype=torch.int32)
        seq_lens = torch.full((b,), length, dtype=torch.int32, device=device)
        return (q, k_cache, v_cache, table, seq_lens, p["D"] ** -0.5)

    def flops(self, workload: Workload) -> float:
        p = workload.params
        return 4.0 * p["B"] * p["Hq"] * p["L"] * p["D"]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        p = workload.params
        qo = 2 * p["B"] * p["Hq"] * p["D"]
        kv = 2 * p["B"] * p["L"] * p["Hkv"] * p["D"]
        return float((qo + kv) * element_size(dtype))


TASK = AttentionDecode()
