"""Paged attention decode: split-KV with a fixed split size, combined per (request, head).

The bundled decode kernel until 2026-12-04 (and, before that, the hand-written candidate its
lineage started from; only the CPU problem's key tile differed); ``nodice/kernels/attention_decode.py``
now folds this combine into the split kernel (one launch).

The seed's design with the two costs it paid at small batches removed:

- **The combine runs one program per (request, query head)**, not one per request. At batch 1
  with 32K keys the seed's single combine program folded 32 heads × 128 splits one after the
  other and took longer than reading the cache. Here each head folds its own splits, SPLIT_TILE
  at a time: the running max over a tile is exact (order-free), the tile's masses and values are
  summed by ``tl.sum`` over a tile of fixed width (masked splits contribute exact zeros), and the
  tiles are folded first to last.
- **K is gathered as rows** ``[BLOCK_N, D]`` (each token's 256 bytes contiguous) and transposed
  in the dot, instead of being loaded column-wise.

Batch-invariant because the split boundaries (every SPLIT_TOKENS tokens from the request's first
token), the key tiles inside a split, the combine's tile width and its fold order depend only on
the request's own length and the head dim, never on the batch size, the other requests' lengths
or where the pages sit in the pool. The grid is sized from the block table's width; splits past
a request's end exit at once and are never read by its combine.

The pins are the best version of a `nodice evolve --device cuda` run seeded with this design
(lineage in ``lab/results/evolve/attention_decode/``).
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# Pinned per head dim (never per batch): key tile, split size, warps and pipeline stages.
BLOCK_N_D128 = 64
SPLIT_TOKENS_D128 = 512
NUM_WARPS_D128 = 4
NUM_STAGES_D128 = 3
# Small head dims (the CPU problem).
BLOCK_N_SMALL = 64
SPLIT_TOKENS_SMALL = 64
# Splits folded per step of the combine.
SPLIT_TILE = 16


@triton.jit
def _decode_split(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    qk_scale,
    table_width,
    max_splits,
    q_heads,
    kv_heads,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(lens_ptr + req)
    start = split * SPLIT_TOKENS
    if start < seq_len:
        offs_g = tl.arange(0, GROUP_PAD)
        offs_d = tl.arange(0, HEAD_DIM)
        offs_n = tl.arange(0, BLOCK_N)
        # The query heads of one kv head, padded to 16 rows so Q·Kᵀ is a tl.dot.
        g_ok = offs_g < GROUP
        heads = kv_head * GROUP + offs_g
        q = tl.load(
            q_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :],
            mask=g_ok[:, None],
            other=0.0,
        )
        m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
        acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
        end = tl.minimum(start + SPLIT_TOKENS, seq_len)
        for tok0 in range(start, end, BLOCK_N):
            toks = tok0 + offs_n
            t_ok = toks < end
            page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
            # Row of the token in the pool viewed as [P*page, Hkv, D].
            row = (page.to(tl.int64) * PAGE + toks % PAGE) * kv_heads + kv_head
            k = tl.load(k_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k)) * qk_scale
            qk = tl.where(t_ok[None, :], qk, float("-inf"))
            # The first tile holds at least one real token, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(qk, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        part = (req * q_heads + heads) * max_splits + split
        tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_ok[:, None])
        tl.store(part_max_ptr + part, m_i, mask=g_ok)
        tl.store(part_sum_ptr + part, l_i, mask=g_ok)


@triton.jit
def _combine_head(
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    lens_ptr,
    o_ptr,
    max_splits,
    q_heads,
    HEAD_DIM: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
    SPLIT_TILE: tl.constexpr,
):
    req = tl.program_id(0)
    head = tl.program_id(1)
    seq_len = tl.load(lens_ptr + req)
    n_splits = (seq_len + SPLIT_TOKENS - 1) // SPLIT_TOKENS
    offs_s = tl.arange(0, SPLIT_TILE)
    offs_d = tl.arange(0, HEAD_DIM)
    base = (req * q_heads + head) * max_splits
    m_all = tl.full([], float("-inf"), dtype=tl.float32)
    l_all = tl.zeros([], dtype=tl.float32)
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    # Tiles of SPLIT_TILE splits, first to last; a tile's masked splits add exact zeros.
    for s0 in range(0, n_splits, SPLIT_TILE):
        s_ok = s0 + offs_s < n_splits
        m_s = tl.load(part_max_ptr + base + s0 + offs_s, mask=s_ok, other=float("-inf"))
        l_s = tl.load(part_sum_ptr + base + s0 + offs_s, mask=s_ok, other=0.0)
        a_s = tl.load(
            part_acc_ptr + (base + s0 + offs_s)[:, None] * HEAD_DIM + offs_d[None, :],
            mask=s_ok[:, None],
            other=0.0,
        )
        m_new = tl.maximum(m_all, tl.max(m_s, axis=0))
        alpha = tl.exp2(m_all - m_new)
        beta = tl.where(s_ok, tl.exp2(m_s - m_new), 0.0)
        l_all = l_all * alpha + tl.sum(l_s * beta, axis=0)
        acc = acc * alpha + tl.sum(a_s * beta[:, None], axis=0)
        m_all = m_new
    tl.store(o_ptr + (req * q_heads + head) * HEAD_DIM + offs_d, (acc / l_all).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch, q_heads, head_dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    group_pad = max(16, triton.next_power_of_2(group))
    # Every pin follows the head dim alone, never the batch.
    if head_dim >= 128:
        block_n, split_tokens = BLOCK_N_D128, SPLIT_TOKENS_D128
        num_warps, num_stages = NUM_WARPS_D128, NUM_STAGES_D128
    else:
        block_n, split_tokens = BLOCK_N_SMALL, SPLIT_TOKENS_SMALL
        num_warps, num_stages = 4, 2
    table_width = block_table.shape[1]
    # Enough splits for the widest block table; a request's splits past its end exit at once.
    max_splits = triton.cdiv(table_width * page, split_tokens)
    block_table = block_table.contiguous()
    seq_lens = seq_lens.contiguous()
    part_acc = torch.empty((batch, q_heads, max_splits, head_dim), dtype=torch.float32, device=q.device)
    part_max = torch.empty((batch, q_heads, max_splits), dtype=torch.float32, device=q.device)
    part_sum = torch.empty((batch, q_heads, max_splits), dtype=torch.float32, device=q.device)
    _decode_split[(batch, kv_heads, max_splits)](
        q.contiguous(),
        k_cache.contiguous(),
        v_cache.contiguous(),
        block_table,
        seq_lens,
        part_acc,
        part_max,
        part_sum,
        sm_scale * LOG2E,
        table_width,
        max_splits,
        q_heads,
        kv_heads,
        GROUP=group,
        GROUP_PAD=group_pad,
        HEAD_DIM=head_dim,
        PAGE=page,
        BLOCK_N=block_n,
        SPLIT_TOKENS=split_tokens,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    o = torch.empty_like(q)
    _combine_head[(batch, q_heads)](
        part_acc,
        part_max,
        part_sum,
        seq_lens,
        o,
        max_splits,
        q_heads,
        HEAD_DIM=head_dim,
        SPLIT_TOKENS=split_tokens,
        SPLIT_TILE=SPLIT_TILE,
        num_warps=4,
    )
    return o
