"""The attention_decode seed (nodice/examples/attention_decode/seed.py) as the pool was built from it."""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


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
            k = tl.load(k_ptr + row[None, :] * HEAD_DIM + offs_d[:, None], mask=t_ok[None, :], other=0.0)
            qk = tl.dot(q, k) * qk_scale
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
def _combine_splits(
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    lens_ptr,
    o_ptr,
    max_splits,
    q_heads,
    HEADS_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
):
    req = tl.program_id(0)
    seq_len = tl.load(lens_ptr + req)
    n_splits = (seq_len + SPLIT_TOKENS - 1) // SPLIT_TOKENS
    offs_h = tl.arange(0, HEADS_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    h_ok = offs_h < q_heads
    base = (req * q_heads + offs_h) * max_splits
    m_all = tl.full([HEADS_PAD], float("-inf"), dtype=tl.float32)
    l_all = tl.zeros([HEADS_PAD], dtype=tl.float32)
    acc = tl.zeros([HEADS_PAD, HEAD_DIM], dtype=tl.float32)
    # Splits folded first to last: the order is the request's own.
    for s in range(0, n_splits):
        m_s = tl.load(part_max_ptr + base + s, mask=h_ok, other=0.0)
        l_s = tl.load(part_sum_ptr + base + s, mask=h_ok, other=0.0)
        a_s = tl.load(
            part_acc_ptr + (base + s)[:, None] * HEAD_DIM + offs_d[None, :], mask=h_ok[:, None], other=0.0
        )
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp2(m_all - m_new)
        beta = tl.exp2(m_s - m_new)
        l_all = l_all * alpha + l_s * beta
        acc = acc * alpha[:, None] + a_s * beta[:, None]
        m_all = m_new
    # Padded rows have no splits; divide them by 1 instead of 0.
    out = acc / tl.where(h_ok, l_all, 1.0)[:, None]
    tl.store(
        o_ptr + (req * q_heads + offs_h)[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=h_ok[:, None],
    )


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch, q_heads, head_dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    group_pad = max(16, triton.next_power_of_2(group))
    # Tile and split size depend on the head dim only, never on the batch.
    block_n = 64 if head_dim >= 64 else 32
    split_tokens = 4 * block_n
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
        num_warps=4,
    )
    o = torch.empty_like(q)
    _combine_splits[(batch,)](
        part_acc,
        part_max,
        part_sum,
        seq_lens,
        o,
        max_splits,
        q_heads,
        HEADS_PAD=triton.next_power_of_2(q_heads),
        HEAD_DIM=head_dim,
        SPLIT_TOKENS=split_tokens,
        num_warps=4,
    )
    return o
