"""DeepSeek sparse attention (DSA, DeepSeek-V3.2): each query row attends to its own top-k tokens.

DSA runs in MLA's absorbed form: a query row holds ``H`` heads of ``Dqk = d_v + d_rope``
columns (512 latent + 64 RoPE in V3.2), the cache holds one latent vector of ``Dqk``
columns per token (all heads share it, MQA), and a token's value is the first ``d_v``
columns of the same vector. The lightning indexer has already chosen, for every query
row, the ``topk`` cache tokens it attends to (2048 in V3.2): ``indices[t, :]`` holds
their global cache slots (``page * page_size + offset``, as FlashMLA's sparse decode and
FlashInfer-Bench's ``dsa_sparse_attention`` take them), in the indexer's score order,
``-1`` marking unused entries (a row whose request has fewer than ``topk`` tokens
before it). There is no causal mask: the indices are the mask.

One task covers decode and prefill: ``T`` query rows, request ``i`` owns rows
``cu_seqlens_q[i]:cu_seqlens_q[i+1]`` (one row per request in decode, a chunk of rows
at consecutive positions in prefill, each row with its own indices). Each row's output
depends on its own row of ``q`` and ``indices`` and the cache tokens they name only.

A sample is one request: its query rows, its cached tokens and each row's top-k
positions within them. ``compose`` places the requests' tokens on pages drawn at random
from a pool that also holds junk, so the same request's indices hold different slots in
different batches, and the batch's query rows, pages and index lists grow with the
batch. What must not change a row's bits: where its pages sit, how many rows share the
launch, and how long its batchmates are (how many of their indices are valid).

Where this differs from the references: FlashMLA's ``flash_mla_sparse_fwd(q, kv, indices,
sm_scale, d_v)`` takes ``kv[s_kv, 1, Dqk]`` and ``indices[s_q, 1, topk]`` (a view of
``kv_cache`` and ``indices``) and returns ``(out, max_logits, lse)``; FlashMLA's decode
takes ``q[b, s_q, H, Dqk]`` with a fixed ``s_q`` per batch and an fp8 cache. FlashInfer-Bench
splits q and the cache into ``q_nope``/``q_pe`` and ``ckv_cache``/``kpe_cache`` (a slice
of the last axis here) and also returns the log2 LSE. This task returns the output only,
in one concatenated ``Dqk`` layout (FlashMLA's), with ``cu_seqlens_q`` so that decode and
prefill requests of any row count share one batch (FlashInfer's sparse MLA decode takes
the same ``cum_seq_lens_q``); a kernel may ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from nodice.tasks._attention import (
    ATTENTION_TOLERANCES,
    PackedRows,
    choose,
    draw_sm_scale,
    positions,
    randint,
)
from nodice.tasks._scratch import row_chunks
from nodice.tasks.base import (
    BIContext,
    Problem,
    Sample,
    Task,
    Tolerance,
    Workload,
    device_generator,
    element_size,
    randn,
)

QK_SCALE = 1.0


@dataclass(frozen=True)
class _Sizes:
    heads: tuple[int, ...]
    d_v: int
    d_rope: int
    page: int
    topk: int
    lengths: tuple[int, int]  # the target request's cached tokens, drawn without hints
    prefill_rows: tuple[int, int]  # query rows of a prefill target


# CPU: tiny latent and top-k so the interpreter is quick; targets shorter and longer than the
# top-k (so some rows carry -1 padding), pages of 8 so a request spans several.
_CPU = _Sizes(heads=(4, 8), d_v=32, d_rope=16, page=8, topk=64, lengths=(9, 90), prefill_rows=(2, 6))
# GPU: DeepSeek-V3.2's MLA (512 latent + 64 RoPE), its top-k of 2048 and 64-token pages.
_GPU = _Sizes(
    heads=(16, 64, 128), d_v=512, d_rope=64, page=64, topk=2048, lengths=(100, 6000), prefill_rows=(16, 200)
)


def _sizes(device: torch.device) -> _Sizes:
    return _GPU if device.type == "cuda" else _CPU


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def cu_seqlens(rows: list[int], device: torch.device) -> torch.Tensor:
    """``[0, r0, r0+r1, …]`` as int32: where each request's query rows start, and the total."""
    out = torch.zeros(len(rows) + 1, dtype=torch.int32)
    out[1:] = torch.cumsum(torch.tensor(rows, dtype=torch.int64), 0).to(torch.int32)
    return out.to(device)


def topk_positions(
    rows: int, length: int, topk: int, gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    """``[rows, topk]`` int32: each row's chosen positions among the request's ``length`` tokens.

    Row ``j`` sits at position ``length - rows + j`` and chooses among the tokens up to it
    (causal selection), as many as it may (``topk`` or fewer), in a random order (the
    indexer's score order has nothing to do with position); unused entries are ``-1``.
    """
    g = device_generator(gen, device)
    scores = torch.rand((rows, length), generator=g, device=device)
    pos = torch.arange(length, device=device)[None, :]
    horizon = torch.arange(length - rows, length, device=device)[:, None]
    scores = torch.where(pos <= horizon, scores, torch.full_like(scores, -1.0))
    k = min(topk, length)
    best, chosen = scores.topk(k, dim=1)
    chosen = torch.where(best >= 0, chosen, torch.full_like(chosen, -1))
    out = torch.full((rows, topk), -1, dtype=torch.int32, device=device)
    out[:, :k] = chosen.to(torch.int32)
    return out


def to_slots(positions_: torch.Tensor, pages: torch.Tensor, page: int) -> torch.Tensor:
    """Positions within a request → global cache slots through its pages; ``-1`` stays ``-1``."""
    valid = positions_ >= 0
    p = positions_.clamp(min=0).long()
    slots = pages.to(p.device)[p // page] * page + p % page
    return torch.where(valid, slots, torch.full_like(slots, -1)).to(torch.int32)


def _place(lengths: list[int], page: int, spare: int, gen: torch.Generator) -> tuple[int, list[torch.Tensor]]:
    """Pool size and each request's pages, drawn at random from the pool (``spare`` pages of junk)."""
    per = [_cdiv(n, page) for n in lengths]
    pool = sum(per) + spare
    order = torch.randperm(pool, generator=gen)
    out, first = [], 0
    for n in per:
        out.append(order[first : first + n])
        first += n
    return pool, out


# (variant, [(batch, slot, batchmates' cached tokens, batchmates' query rows)]).
_Plan = list[tuple[dict[str, Any], list[tuple[int, int, tuple[int, int], tuple[int, int]]]]]
_CPU_CONTEXTS: _Plan = [
    (
        # Decode: one-token mates, mates far longer than the top-k, mates with prefill chunks, and
        # 34 rows (past the 33 at which a 132-way split heuristic drops below 4 splits).
        {"regime": "decode", "heads": 4},
        [
            (2, 1, (1, 1), (1, 1)),
            (5, 4, (150, 300), (1, 1)),
            (6, 0, (1, 30), (2, 8)),
            (34, 33, (1, 12), (1, 1)),
        ],
    ),
    (
        {"regime": "prefill", "heads": 4},
        [(3, 2, (100, 260), (1, 8)), (8, 0, (1, 40), (3, 6)), (4, 1, (1, 4), (1, 1))],
    ),
    ({"regime": "decode", "heads": 8}, [(9, 4, (1, 200), (1, 1))]),
]
_GPU_CONTEXTS: _Plan = [
    (
        {"regime": "decode", "heads": 16},
        [
            (2, 1, (1, 1), (1, 1)),
            (8, 0, (8192, 16384), (1, 1)),
            (17, 8, (1, 4096), (1, 1)),
            (64, 63, (1, 2048), (1, 1)),
            (133, 66, (1, 1024), (1, 1)),
            (9, 4, (100, 3000), (16, 256)),
        ],
    ),
    ({"regime": "decode", "heads": 128}, [(3, 2, (1, 8), (1, 1)), (33, 16, (1, 8192), (1, 1))]),
    (
        {"regime": "prefill", "heads": 64},
        [(2, 1, (1, 4), (1, 1)), (5, 0, (2000, 12000), (16, 512)), (24, 23, (1, 3000), (1, 64))],
    ),
]


class SparseMLA(PackedRows, Task):
    name = "dsa"
    family = "attention"
    signature = (
        "kernel(q[T,H,Dqk], kv_cache[P,page,Dqk], indices[T,topk] int32, cu_seqlens_q[B+1] int32, "
        "sm_scale: float, d_v: int) -> o[T,H,d_v] bf16; row t attends to the cache slots "
        "indices[t, :] (page*page_size + offset, -1 = unused) with keys kv[slot, :] and values "
        "kv[slot, :d_v]; request i owns rows cu_seqlens_q[i]:cu_seqlens_q[i+1]"
    )
    sample_unit = (
        "one request (its query rows, its cached tokens, each row's top-k); page placement and "
        "the batchmates' lengths are context"
    )
    output_names = ("o",)
    arity = 6
    packed_sample = "a request"

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Heads, latent and RoPE widths, page size, top-k and the target's regime (decode or prefill)."""
        s = _sizes(device)
        regime = str(variant.get("regime") or choose(gen, ["decode", "prefill"]))
        if regime not in ("decode", "prefill"):
            raise ValueError(f"unknown regime '{regime}' (known: decode, prefill)")
        heads = int(variant.get("heads") or choose(gen, list(s.heads)))
        rows = (1, 1) if regime == "decode" else s.prefill_rows
        dims = {
            "regime": regime,
            "H": heads,
            "d_v": s.d_v,
            "d_rope": s.d_rope,
            "page": int(variant.get("page") or s.page),
            "topk": int(variant.get("topk") or s.topk),
            "lengths": tuple(variant.get("lengths") or s.lengths),
            "rows": rows,
        }
        # DeepSeek scales by the unabsorbed head's width (128 + 64 = Dqk / 3), drawn ±25 %.
        return Problem(device, dtype, dims, {"sm_scale": draw_sm_scale(gen, (s.d_v + s.d_rope) // 3)})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """One request; ``mate_len``/``mate_rows=(lo, hi)`` draw its tokens/rows from those ranges."""
        d = problem.dims
        lo, hi = hints.get("mate_len") or d["lengths"]
        r_lo, r_hi = hints.get("mate_rows") or d["rows"]
        rows = randint(gen, int(r_lo), int(r_hi))
        length = max(rows, randint(gen, int(lo), int(hi)))
        d_qk = d["d_v"] + d["d_rope"]
        dev, dtype = problem.device, problem.dtype
        q = randn((rows, d["H"], d_qk), gen, dev, dtype, scale=QK_SCALE)
        kv = randn((length, d_qk), gen, dev, dtype)
        pos = topk_positions(rows, length, d["topk"], gen, dev)
        return Sample({"q": q, "kv": kv, "positions": pos}, {"rows": rows, "length": length})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        """Scatter each request's tokens over pool pages drawn at random; junk everywhere else."""
        d, dev = problem.dims, problem.device
        page = d["page"]
        lengths = [int(s.meta["length"]) for s in samples]
        used = sum(_cdiv(n, page) for n in lengths)
        pool, pages = _place(lengths, page, randint(gen, 1, max(2, used // 2)), gen)
        d_qk = d["d_v"] + d["d_rope"]
        kv_cache = randn((pool, page, d_qk), gen, dev, problem.dtype, scale=3.0)
        tokens = kv_cache.view(pool * page, d_qk)
        indices = []
        for s, n, where in zip(samples, lengths, pages, strict=True):
            tok = torch.arange(n)
            tokens[(where[tok // page] * page + tok % page).to(dev)] = s.tensors["kv"]
            indices.append(to_slots(s.tensors["positions"], where, page))
        q = torch.cat([s.tensors["q"] for s in samples]).contiguous()
        cu = cu_seqlens([int(s.meta["rows"]) for s in samples], dev)
        return (q, kv_cache, torch.cat(indices).contiguous(), cu, problem.shared["sm_scale"], d["d_v"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        q, d_v = args[0], int(args[5])
        return [(torch.Size((q.shape[0], q.shape[1], d_v)), q.dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        q, kv_cache, indices, _, sm_scale, d_v = args
        rows, heads, d_qk = q.shape
        out = torch.empty((rows, heads, int(d_v)), dtype=q.dtype, device=q.device)
        if q.device.type == "meta":
            return out
        tokens = kv_cache.reshape(-1, d_qk)
        topk = indices.shape[1]
        # fp32 scratch per row: the gathered keys, the scores and probabilities.
        for chunk in row_chunks(rows, 4 * topk * (d_qk + 3 * heads)):
            idx = indices[chunk].long()
            valid = idx >= 0
            keys = tokens[idx.clamp(min=0)].float()  # [r, topk, Dqk]
            scores = torch.einsum("rhd,rkd->rhk", q[chunk].float(), keys) * float(sm_scale)
            scores.masked_fill_(~valid[:, None, :], float("-inf"))
            probs = torch.softmax(scores, dim=-1).nan_to_num_(0.0)  # a row with no token gives 0
            out[chunk] = torch.einsum("rhk,rkd->rhd", probs, keys[..., : int(d_v)]).to(q.dtype)
        return out

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return ATTENTION_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 6] if device.type == "cpu" else [1, 7, 48]

    def contexts(self, device: torch.device) -> list[BIContext]:
        out = []
        for variant, batches in _GPU_CONTEXTS if device.type == "cuda" else _CPU_CONTEXTS:
            label = f"{variant['regime']},h{variant['heads']}"
            for b, pos, mate_len, mate_rows in batches:
                where = dict(positions(b)).get(pos, str(pos))
                name = f"{label},batch={b},{where},mate_len={mate_len},mate_rows={mate_rows}"
                params = {"variant": variant, "mate_len": mate_len, "mate_rows": mate_rows}
                out.append(BIContext(name, b, pos, params))
        return out

    def witnesses(self, device: torch.device) -> int:
        # Every variant group pays two batch-1 calls per compared sample: few under the interpreter.
        return 2 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _workloads()

    def small_workloads(self) -> list[Workload]:
        cpu = {"topk": 64, "d_v": 32, "d_rope": 16, "page": 8}
        return [
            Workload("cpu-decode", {"B": 4, "rows": 1, "L": 100, "H": 4, **cpu}),
            Workload("cpu-prefill", {"B": 1, "rows": 16, "L": 80, "H": 4, **cpu}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        b, rows, length, page, topk = p["B"], p["rows"], p["L"], p["page"], p["topk"]
        d_qk = p["d_v"] + p["d_rope"]
        per = _cdiv(length, page)
        # Pages scattered over the pool, as after a while of serving.
        table = torch.randperm(b * per, generator=gen).view(b, per)
        kv_cache = randn((b * per, page, d_qk), gen, device, dtype)
        q = randn((b * rows, p["H"], d_qk), gen, device, dtype, QK_SCALE)
        indices = torch.cat(
            [to_slots(topk_positions(rows, length, topk, gen, device), table[i], page) for i in range(b)]
        )
        cu = cu_seqlens([rows] * b, device)
        return (q, kv_cache, indices, cu, (d_qk // 3) ** -0.5, p["d_v"])

    def flops(self, workload: Workload) -> float:
        """2·H·(Dqk + d_v) per (row, valid index): the scores and the weighted sum of values."""
        p = workload.params
        return 2.0 * p["H"] * (2 * p["d_v"] + p["d_rope"]) * p["B"] * _valid_entries(p)

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """q and o once, the index lists, and each request's distinct selected tokens once."""
        p = workload.params
        d_qk = p["d_v"] + p["d_rope"]
        rows = p["B"] * p["rows"]
        qo = rows * p["H"] * (d_qk + p["d_v"])
        tokens = p["B"] * min(p["L"], p["rows"] * p["topk"])
        return float((qo + tokens * d_qk) * element_size(dtype) + rows * p["topk"] * 4 + (p["B"] + 1) * 4)


def _valid_entries(p: dict[str, Any]) -> int:
    """Valid indices of one request: row j (position L - rows + j) has min(topk, position + 1)."""
    first = p["L"] - p["rows"]
    return sum(min(p["topk"], first + j + 1) for j in range(p["rows"]))


# DeepSeek-V3.2's MLA: 128 heads (one GPU with data-parallel attention), 16 per GPU at TP8, 64 at TP2.
_V32 = {"d_v": 512, "d_rope": 64, "page": 64, "topk": 2048}
_MODEL = "DeepSeek-V3.2"


def _workloads() -> list[Workload]:
    out = []
    for heads in (128, 16):
        for b, length in ((1, 32768), (32, 8192), (64, 32768), (128, 4096), (128, 65536)):
            if heads == 16 and b not in (32, 128):
                continue
            params = {"B": b, "rows": 1, "L": length, "H": heads, **_V32}
            out.append(Workload(f"v32-h{heads}-decode-b{b}-kv{length // 1024}k", params, _MODEL))
    # Prefill: chunks of a long prompt (rows at the end of the context, each with its own top-k),
    # and a step of several shorter chunks.
    for heads, b, rows, length in ((128, 1, 4096, 8192), (128, 1, 4096, 32768), (64, 4, 1024, 16384)):
        params = {"B": b, "rows": rows, "L": length, "H": heads, **_V32}
        name = f"v32-h{heads}-prefill-b{b}-q{rows // 1024}k-kv{length // 1024}k"
        out.append(Workload(name, params, _MODEL))
    return out


TASK = SparseMLA()
