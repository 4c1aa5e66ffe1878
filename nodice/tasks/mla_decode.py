"""Multi-head latent attention (MLA) decode over a paged latent cache: one request is one sample.

DeepSeek-V3 and Kimi-K2 decode in the absorbed form: every query head attends
to one shared latent per token, the compressed KV ``ckv`` (width 512, the
keys' no-position part and the values at once) and a 64-wide RoPE key part
``kpe``. For request ``i`` with ``n = seq_lens[i]`` tokens::

    score[h, t] = (q_nope[i, h] · ckv[t] + q_pe[i, h] · kpe[t]) · sm_scale
    o[i, h]     = softmax_t(score[h, :]) · ckv[0:n]

Signature (pinned; ``nodice tasks`` prints it)::

    kernel(q_nope[B,H,512], q_pe[B,H,64], ckv_cache[P,page,512], kpe_cache[P,page,64],
           block_table[B,maxp] int32, seq_lens[B] int32, sm_scale: float) -> o[B,H,512]

The tensor names, shapes and the output follow FlashInfer's
``BatchMLAPagedAttentionWrapper.run(q_nope, q_pe, ckv_cache, kpe_cache)`` and
FlashInfer-Bench's ``mla_paged_decode_h16_ckv512_kpe64_ps*`` definitions. Where
this task chooses differently:

* The page table is ``attention_decode``'s (and FlashMLA's): ``block_table[B, maxp]``
  and ``seq_lens[B]``. FlashInfer's CSR form is one reshape away:
  ``kv_indptr = [0, cumsum(ceil(seq_lens / page))]``, ``kv_indices`` = each row's
  first ``ceil(seq_lens[i] / page)`` entries in order, ``kv_len_arr = seq_lens``
  (``nodice.measuring.baselines.paged_kv.flashinfer_page_indices``). FlashInfer-Bench's
  ``ps1`` definitions take no lengths: there ``seq_lens = diff(kv_indptr)``.
* Only ``o`` is returned, not FlashInfer-Bench's second output ``lse`` (its base-2
  log-sum-exp), which a decode layer without cascade or split-prefix merging drops.
* ``sm_scale`` is an argument: DeepSeek-V3 uses ``1/sqrt(128 + 64)`` times the square
  of its YaRN ``mscale`` (about 1.87 at factor 40).

The pool is shared by the batch and its pages are placed at random, as in
``attention_decode``: pool pages that belong to nobody, block-table columns past a
request's last page and the tail of its last page hold junk, so a kernel that
reads past a request's length is wrong, and one whose result depends on where
the pages sit or on the batchmates' lengths is not invariant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from nodice.tasks._attention import (
    ATTENTION_TOLERANCES,
    attend,
    cdiv,
    choose,
    context,
    randint,
    scatter_pages,
)
from nodice.tasks.base import BIContext, Problem, Sample, Task, Tolerance, Workload, element_size, randn

CKV_DIM = 512
KPE_DIM = 64
# The head dim before absorption (128 no-position + 64 RoPE): DeepSeek's softmax scale base.
QK_HEAD_DIM = 128 + 64
# DeepSeek-V3's YaRN correction (rope factor 40, mscale_all_dim 1): softmax_scale *= mscale².
YARN_MSCALE = 0.1 * math.log(40.0) + 1.0
DEEPSEEK_SM_SCALE = QK_HEAD_DIM**-0.5 * YARN_MSCALE**2
# FlashMLA's block size, and FlashInfer-Bench's ps64 definitions.
PAGE_SIZE = 64

# (label, heads, model). DeepSeek-V3 has 128 heads: 16 per GPU at tensor parallel 8, all 128 with
# data-parallel attention; Kimi-K2 has 64 (the same latent widths).
_DEEPSEEK_TP8 = ("dsv3-tp8", 16, "DeepSeek-V3 (TP8)")
_DEEPSEEK_DP = ("dsv3-dp", 128, "DeepSeek-V3 (DP attention)")
_KIMI = ("kimi-k2", 64, "Kimi-K2 (DP attention)")


def _workloads() -> list[Workload]:
    shapes = [(_DEEPSEEK_TP8, b, kv) for b in (1, 16, 64, 128) for kv in (1024, 8192, 32768)]
    shapes += [(_DEEPSEEK_DP, b, kv) for b, kv in ((1, 8192), (16, 8192), (64, 4096), (128, 1024))]
    shapes += [(_KIMI, b, kv) for b, kv in ((8, 32768), (32, 8192), (128, 2048))]
    out = []
    for (label, heads, model), b, kv in shapes:
        params = {"B": b, "L": kv, "H": heads, "page": PAGE_SIZE}
        out.append(Workload(f"{label}-b{b}-kv{kv // 1024}k", params, model))
    return out


@dataclass(frozen=True)
class _Sizes:
    page: int
    heads: tuple[int, ...]
    lengths: tuple[int, int]  # range of request lengths drawn without hints


# CPU: pages of 8 so that even short requests span several; lengths that straddle the
# kernels' 32-token tiles and 256-token splits. GPU: FlashMLA's pages, the real head counts.
_CPU = _Sizes(page=8, heads=(4, 16), lengths=(17, 300))
_GPU = _Sizes(page=PAGE_SIZE, heads=(16, 64, 128), lengths=(200, 3000))

# (variant, [(batch, slot, batchmate length range)]). The batchmates run from one token to
# many times the target; batch·heads and the batch's tokens cross 132 (the SM count split
# heuristics divide) and powers of two between the batches. On CPU the big batches use four
# heads (the interpreter pays per program, not per head).
_Plan = list[tuple[dict[str, Any], list[tuple[int, int, tuple[int, int]]]]]
_CPU_CONTEXTS: _Plan = [
    ({"heads": 4}, [(34, 33, (1, 16)), (5, 4, (1, 1)), (6, 0, (300, 600)), (9, 4, (1, 300))]),
    ({"heads": 16}, [(5, 2, (1, 8)), (7, 3, (150, 400))]),
    # FlashInfer-Bench's ps1 layout: every token its own page, placement at token granularity.
    ({"heads": 16, "page": 1}, [(4, 1, (1, 300))]),
    # Short targets: a tile sized from the longest request shows up here.
    ({"heads": 4, "lengths": (1, 60)}, [(3, 2, (1, 4)), (6, 0, (100, 400))]),
    # The problem-shape sweep: short requests, B·heads 16 … 160, the batch's tokens tens … ~800.
    ({"heads": 4, "lengths": (9, 40)}, [(4, 3, (1, 8)), (17, 8, (1, 48)), (40, 39, (1, 8))]),
]
_GPU_CONTEXTS: _Plan = [
    (
        {"heads": 16},
        [
            (2, 1, (1, 1)),
            (8, 0, (8192, 16384)),
            (17, 8, (1, 8192)),
            (64, 63, (1, 2048)),
            (133, 66, (1, 1024)),
        ],
    ),
    ({"heads": 128}, [(3, 2, (1, 16)), (9, 4, (4000, 8000)), (40, 0, (1, 512))]),
    ({"heads": 64}, [(5, 4, (1, 16384)), (33, 16, (1, 2048))]),
    ({"heads": 16, "page": 1}, [(4, 1, (1, 4096)), (65, 0, (1, 512))]),
    # Short targets beside long batchmates: tiles sized from the longest request.
    ({"heads": 16, "lengths": (1, 100)}, [(3, 2, (1, 4)), (9, 4, (1000, 4000)), (40, 0, (1, 512))]),
    # The sweep: short requests so that B (2 … 257) and the batch's tokens cross the SM count.
    (
        {"heads": 16, "lengths": (16, 300)},
        [(2, 1, (1, 64)), (9, 8, (1, 512)), (33, 16, (1, 256)), (133, 66, (1, 128)), (257, 0, (1, 64))],
    ),
]


def _draw_sm_scale(gen: torch.Generator) -> float:
    """DeepSeek's scale times a factor in [0.75, 1.25]: a kernel that ignores ``sm_scale`` is wrong."""
    return DEEPSEEK_SM_SCALE * (0.75 + 0.5 * float(torch.rand((1,), generator=gen).item()))


class MlaDecode(Task):
    name = "mla_decode"
    family = "attention"
    unit = "GB/s"
    signature = (
        "kernel(q_nope[B,H,512], q_pe[B,H,64], ckv_cache[P,page,512], kpe_cache[P,page,64], "
        "block_table[B,maxp] int32, seq_lens[B] int32, sm_scale: float) -> o[B,H,512] bf16; "
        "score = (q_nope·ckv + q_pe·kpe)·sm_scale over request i's first seq_lens[i] tokens "
        "(pages block_table[i, :]), o = softmax(score)·ckv"
    )
    sample_unit = (
        "one request (its queries, its latent pages, its length); page placement and the "
        "batchmates' lengths are part of the context"
    )
    output_names = ("o",)
    arity = 7

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Head count, page size and the length range of requests drawn without hints."""
        sizes = _GPU if device.type == "cuda" else _CPU
        dims = {
            "H": int(variant.get("heads") or choose(gen, list(sizes.heads))),
            "page": int(variant.get("page") or sizes.page),
            "lengths": tuple(variant.get("lengths") or sizes.lengths),
        }
        return Problem(device, dtype, dims, {"sm_scale": _draw_sm_scale(gen)})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """One request; ``mate_len=(lo, hi)`` draws its length from that range instead of the problem's."""
        d, dev, dtype = problem.dims, problem.device, problem.dtype
        lo, hi = hints.get("mate_len") or d["lengths"]
        n = randint(gen, int(lo), int(hi))
        tensors = {
            "q_nope": randn((d["H"], CKV_DIM), gen, dev, dtype),
            "q_pe": randn((d["H"], KPE_DIM), gen, dev, dtype),
            "ckv": randn((n, CKV_DIM), gen, dev, dtype),
            "kpe": randn((n, KPE_DIM), gen, dev, dtype),
        }
        return Sample(tensors, {"length": n})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        """Scatter each request's tokens over pool pages drawn at random; junk everywhere else."""
        d, dev, dtype = problem.dims, problem.device, problem.dtype
        page = d["page"]
        lengths = [int(s.meta["length"]) for s in samples]
        pool, table, rows = scatter_pages(gen, lengths, page, dev)
        ckv_cache = randn((pool, page, CKV_DIM), gen, dev, dtype, scale=3.0)
        kpe_cache = randn((pool, page, KPE_DIM), gen, dev, dtype, scale=3.0)
        ckv_cache.view(pool * page, CKV_DIM)[rows] = torch.cat([s.tensors["ckv"] for s in samples])
        kpe_cache.view(pool * page, KPE_DIM)[rows] = torch.cat([s.tensors["kpe"] for s in samples])
        q_nope = torch.stack([s.tensors["q_nope"] for s in samples]).contiguous()
        q_pe = torch.stack([s.tensors["q_pe"] for s in samples]).contiguous()
        seq_lens = torch.tensor(lengths, dtype=torch.int32, device=dev)
        return (q_nope, q_pe, ckv_cache, kpe_cache, table, seq_lens, problem.shared["sm_scale"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        """fp32 attention of every query head over its request's latent (one shared kv head)."""
        q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale = args
        page = ckv_cache.shape[1]
        out = torch.empty(q_nope.shape, dtype=q_nope.dtype, device=q_nope.device)
        if q_nope.device.type == "meta":  # output spec only: the lengths are data
            return out
        for i, n in enumerate(seq_lens.tolist()):
            pages = block_table[i, : cdiv(n, page)].long()
            ckv = ckv_cache[pages].reshape(-1, ckv_cache.shape[2])[:n]
            kpe = kpe_cache[pages].reshape(-1, kpe_cache.shape[2])[:n]
            # [H, 1, 576] queries against one kv head of 576-wide keys whose values are the first 512.
            q = torch.cat([q_nope[i], q_pe[i]], dim=-1).unsqueeze(1)
            k = torch.cat([ckv, kpe], dim=-1).unsqueeze(0)
            o = attend(q, k, ckv.unsqueeze(0), False, float(sm_scale), out_dtype=q_nope.dtype)
            out[i] = o.squeeze(1)
        return out

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return ATTENTION_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 6] if device.type == "cpu" else [1, 7, 64, 160]

    def contexts(self, device: torch.device) -> list[BIContext]:
        out = []
        for variant, batches in _GPU_CONTEXTS if device.type == "cuda" else _CPU_CONTEXTS:
            label = f"h{variant['heads']}" + (f",page={variant['page']}" if "page" in variant else "")
            if "lengths" in variant:
                label += f",target={variant['lengths'][0]}-{variant['lengths'][1]}"
            out += [context(label, b, pos, variant, mate_len=mates) for b, pos, mates in batches]
        return out

    def witnesses(self, device: torch.device) -> int:
        # Every variant group pays two batch-1 calls per compared sample: few under the interpreter.
        return 2 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _workloads()

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-h16", {"B": 3, "L": 96, "H": 16, "page": 8}),
            Workload("cpu-h4-long", {"B": 2, "L": 400, "H": 4, "page": 8}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        b, length, page, heads = p["B"], p["L"], p["page"], p["H"]
        per_request = cdiv(length, page)
        pool = b * per_request
        q_nope = randn((b, heads, CKV_DIM), gen, device, dtype)
        q_pe = randn((b, heads, KPE_DIM), gen, device, dtype)
        ckv_cache = randn((pool, page, CKV_DIM), gen, device, dtype)
        kpe_cache = randn((pool, page, KPE_DIM), gen, device, dtype)
        # Pages scattered over the pool, as after a while of serving.
        table = torch.randperm(pool, generator=gen).view(b, per_request).to(device=device, dtype=torch.int32)
        seq_lens = torch.full((b,), length, dtype=torch.int32, device=device)
        return (q_nope, q_pe, ckv_cache, kpe_cache, table, seq_lens, DEEPSEEK_SM_SCALE)

    def flops(self, workload: Workload) -> float:
        """2·(512+64) for the scores and 2·512 for P·ckv, per head and token."""
        p = workload.params
        return 2.0 * p["B"] * p["H"] * p["L"] * (CKV_DIM + KPE_DIM + CKV_DIM)

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """The queries and outputs, and each request's latent read once (shared by all heads)."""
        p = workload.params
        q_and_o = p["B"] * p["H"] * (CKV_DIM + KPE_DIM + CKV_DIM)
        latent = p["B"] * p["L"] * (CKV_DIM + KPE_DIM)
        return float((q_and_o + latent) * element_size(dtype))


TASK = MlaDecode()
