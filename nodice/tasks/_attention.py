"""What the attention tasks share: head layouts, problem variants, the fp32 reference, tolerances.

Head layout and causality are properties of a whole batch (one launch), so
they live in the :class:`~nodice.tasks.base.Problem`. A BI context that needs a
particular layout names it in ``BIContext.params["variant"]``; dynamic
validation builds a problem for it with ``task.problem(gen, device, dtype,
**variant)``. Without a variant (reference correctness), the layout is drawn
from the generator, so successive trials cover different layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import torch

from nodice.tasks._scratch import scratch_budget
from nodice.tasks.base import BIContext, Output, Tolerance

# The streaming-multiprocessor count of an H100/H200: split heuristics compare
# batch·heads with it, so GPU contexts sit on both sides of it.
HOPPER_SM_COUNT = 132


@dataclass(frozen=True)
class HeadLayout:
    """Query and key/value head counts; MHA when equal, GQA (MQA when ``kv_heads == 1``) otherwise."""

    name: str
    q_heads: int
    kv_heads: int

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads


# CPU layouts are tiny because Triton's interpreter pays per program instance.
CPU_LAYOUTS = {
    "mha": HeadLayout("mha", 4, 4),
    "gqa": HeadLayout("gqa", 4, 2),
    "mqa": HeadLayout("mqa", 4, 1),
}
GPU_LAYOUTS = {
    "mha": HeadLayout("mha", 16, 16),
    "gqa": HeadLayout("gqa", 32, 8),
    "gqa4": HeadLayout("gqa4", 32, 4),
}

# Tolerances against the fp32 reference. bf16 attention rounds P to bf16 before
# P·V and the output once more; errors of ~1 % of |o| are normal for a correct
# flash kernel, an indexing or masking bug is off by O(1).
ATTENTION_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4),
    torch.float16: Tolerance(atol=4e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=3e-2, rtol=2e-2),
}


# Layouts of the problem-shape sweep, on both devices and only by name: with one or two heads,
# batch·heads and batch·heads·tokens start small at batch 1, so a heuristic keyed on such a
# product (a split or tile chosen while B·H < 132, or while the batch has few tokens) changes
# between the sweep's batches. Never drawn at random for correctness problems.
SWEEP_LAYOUTS = {
    "h1": HeadLayout("h1", 1, 1),
    "h2": HeadLayout("h2", 2, 1),
}


def layouts_for(device: torch.device) -> dict[str, HeadLayout]:
    return GPU_LAYOUTS if device.type == "cuda" else CPU_LAYOUTS


def randint(gen: torch.Generator, lo: int, hi: int) -> int:
    """Uniform integer in ``[lo, hi]`` drawn from ``gen``."""
    return int(torch.randint(lo, hi + 1, (1,), generator=gen).item())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def scatter_pages(
    gen: torch.Generator, lengths: list[int], page: int, device: torch.device
) -> tuple[int, torch.Tensor, torch.Tensor]:
    """A paged pool for requests of ``lengths``: (pool pages, block table, every token's pool row).

    Each request gets its own pool pages drawn at random; spare pages are left for junk. Columns past
    a request's last page point at arbitrary pool pages, as a reused block table would, and a few
    spare columns widen the table further. Token ``t`` of request ``i`` lives at row
    ``rows[sum(lengths[:i]) + t]`` of the pool viewed as ``[pool * page, …]``: one index for the whole
    batch, so that its tokens are placed with one copy per cache rather than one per request (each a
    launch, and the index a host-to-device copy, on a GPU).
    """
    pages_per = [cdiv(n, page) for n in lengths]
    used = sum(pages_per)
    pool = used + randint(gen, 1, max(2, used // 2))
    slot_order = torch.randperm(pool, generator=gen)
    width = max(pages_per) + randint(gen, 0, 2)
    table = torch.randint(0, pool, (len(lengths), width), generator=gen, dtype=torch.int32)
    token_pages, token_offsets = [], []
    first = 0
    for i, n in enumerate(lengths):
        slots = slot_order[first : first + pages_per[i]]
        first += pages_per[i]
        table[i, : pages_per[i]] = slots.to(torch.int32)
        tok = torch.arange(n)
        token_pages.append(slots[tok // page])
        token_offsets.append(tok % page)
    rows = torch.cat(token_pages) * page + torch.cat(token_offsets)
    return pool, table.to(device), rows.to(device)


def choose(gen: torch.Generator, options: list[Any]) -> Any:
    return options[randint(gen, 0, len(options) - 1)]


def pick_layout(gen: torch.Generator, device: torch.device, name: str | None) -> HeadLayout:
    table = layouts_for(device)
    if name is None:
        return table[choose(gen, sorted(table))]
    named = {**table, **SWEEP_LAYOUTS}
    if name not in named:
        raise ValueError(f"unknown head layout '{name}' (known: {', '.join(sorted(named))})")
    return named[name]


def draw_sm_scale(gen: torch.Generator, head_dim: int) -> float:
    """``1/sqrt(D)`` times a factor in [0.75, 1.25]: a kernel that ignores ``sm_scale`` is wrong."""
    factor = 0.75 + 0.5 * float(torch.rand((1,), generator=gen).item())
    return factor / head_dim**0.5


@dataclass(frozen=True)
class AttentionChunks:
    """How one sequence's attention is cut: ``kv_heads`` key/value heads (with their
    query heads) by ``queries`` query rows at a time, every chunk over all its keys."""

    kv_heads: int
    queries: int


def chunk_scratch_bytes(chunks: AttentionChunks, group: int, keys: int, head_dim: int) -> int:
    """fp32 scratch of one chunk: scores and probabilities, the chunk's keys and values,
    its queries and outputs, and the causal mask."""
    scores = chunks.kv_heads * group * chunks.queries * keys * 4
    kv = chunks.kv_heads * 2 * keys * head_dim * 4
    rows = chunks.kv_heads * group * chunks.queries * 3 * head_dim * 4
    return 2 * scores + kv + rows + chunks.queries * keys


def plan_attention_chunks(
    q_heads: int, kv_heads: int, queries: int, keys: int, head_dim: int, budget: int | None = None
) -> AttentionChunks:
    """The largest chunks whose scratch fits the budget: all heads if one query row of each
    fits, then as many query rows as the rest of the budget holds.

    A chunk is never smaller than one query row of one kv head's query group, so
    the budget holds unless that row alone exceeds it (keys in the millions).
    """
    budget = scratch_budget(budget)
    group = q_heads // kv_heads

    def cost(heads: int, rows: int) -> int:
        return chunk_scratch_bytes(AttentionChunks(heads, rows), group, keys, head_dim)

    heads = max(1, min(kv_heads, budget // cost(1, 1)))
    per_row = cost(heads, 2) - cost(heads, 1)
    rows = max(1, min(queries, (budget - cost(heads, 1)) // per_row + 1))
    return AttentionChunks(heads, rows)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    sm_scale: float,
    out_dtype: torch.dtype = torch.float32,
    budget: int | None = None,
) -> torch.Tensor:
    """fp32 attention of one sequence: q ``[Hq, Sq, D]``, k/v ``[Hkv, Sk, D]`` → ``[Hq, Sq, D]``
    in ``out_dtype``, each value rounded once.

    GQA shares each key/value head with its ``Hq/Hkv`` query heads. The causal
    mask aligns the last query with the last key (for decode, Sq=1 sees all).
    The full ``[Hq, Sq, Sk]`` scores would not fit a device at long sequences,
    so the work runs in chunks of heads and queries planned by
    :func:`plan_attention_chunks`; each chunk is an exact softmax of its queries
    over every key they may see (keys past a causal chunk's last query are
    masked for all of its rows and left out), so chunking changes only rounding.
    """
    q_heads, queries, head_dim = q.shape
    kv_heads, keys = k.shape[0], k.shape[1]
    group = q_heads // kv_heads
    chunks = plan_attention_chunks(q_heads, kv_heads, queries, keys, head_dim, budget)
    out = torch.empty((q_heads, queries, v.shape[-1]), dtype=out_dtype, device=q.device)
    q_by_kv = q.reshape(kv_heads, group, queries, head_dim)
    out_by_kv = out.view(kv_heads, group, queries, v.shape[-1])
    for h0 in range(0, kv_heads, chunks.kv_heads):
        heads = slice(h0, min(kv_heads, h0 + chunks.kv_heads))
        kf, vf = k[heads].float(), v[heads].float()
        n_heads = kf.shape[0]
        for r0 in range(0, queries, chunks.queries):
            r1 = min(queries, r0 + chunks.queries)
            visible = max(1, min(keys, r1 + keys - queries)) if causal else keys
            # A kv head's query group stacked as rows: one batched matmul per kv head, no repeated keys.
            qc = q_by_kv[heads, :, r0:r1].float().reshape(n_heads, group * (r1 - r0), head_dim)
            scores = torch.matmul(qc, kf[:, :visible].transpose(-1, -2)).mul_(sm_scale)
            if causal:
                rows = torch.arange(r0, r1, device=q.device)[:, None] + (keys - queries)
                cols = torch.arange(visible, device=q.device)[None, :]
                scores.view(n_heads, group, r1 - r0, visible).masked_fill_(cols > rows, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            del scores
            o = torch.matmul(probs, vf[:, :visible])
            out_by_kv[heads, :, r0:r1] = o.view(n_heads, group, r1 - r0, -1).to(out_dtype)
    return out


def positions(batch: int) -> list[tuple[int, str]]:
    """First, middle and last slot of a batch (fewer when the batch is small)."""
    slots = {0: "first", batch // 2: "middle", batch - 1: "last"}
    return sorted(slots.items())


def context(label: str, batch: int, position: int, variant: dict[str, Any], **params: Any) -> BIContext:
    """A context whose name says its variant, batch size and slot."""
    where = dict(positions(batch)).get(position, str(position))
    knobs = "".join(f",{k}={v}" for k, v in params.items())
    return BIContext(f"{label},batch={batch},{where}{knobs}", batch, position, {"variant": variant, **params})


class PackedRows:
    """``select`` for a packed ragged batch: sample ``i`` is rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]``
    of the output, the offsets being the kernel's fourth argument. They are read once however many
    samples are asked for (a host synchronisation on a GPU)."""

    name: str
    packed_sample = "a sequence"

    def select(
        self, output: Output, index: int, args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...]:
        return self._packed_rows(output, [index], args)[0]

    def select_many(
        self, output: Output, indices: list[int], args: tuple[Any, ...] | None = None
    ) -> list[tuple[torch.Tensor, ...]]:
        return self._packed_rows(output, indices, args)

    def _packed_rows(
        self, output: Output, indices: list[int], args: tuple[Any, ...] | None
    ) -> list[tuple[torch.Tensor, ...]]:
        if args is None:
            raise ValueError(
                f"{self.name}: {self.packed_sample}'s rows are found through cu_seqlens_q (pass args)"
            )
        o = output[0] if isinstance(output, tuple) else output
        rows = list(pairwise(args[3].tolist()))
        return [(o[rows[i][0] : rows[i][1]],) for i in indices]
