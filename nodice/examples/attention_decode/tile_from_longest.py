"""VIOLATES batch invariance: the KV tile is sized from the batch's longest request.

Batches of short requests (none longer than 16 pages) get a narrow tile, so
that little of the last tile is wasted on masked lanes; batches holding a
longer request get the wide tile, which streams the cache faster. The online
softmax folds a request's keys in chunks of that tile, so a short request's
output bits change when a long request joins its batch.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _decode(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    o_ptr,
    qk_scale,
    table_width,
    q_heads,
    kv_heads,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq_len = tl.load(lens_ptr + req)
    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = offs_g < GROUP
    heads = kv_head * GROUP + offs_g
    q = tl.load(
        q_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :], mask=g_ok[:, None], other=0.0
    )
    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for tok0 in range(0, seq_len, BLOCK_N):
        toks = tok0 + offs_n
        t_ok = toks < seq_len
        page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
        row = (page.to(tl.int64) * PAGE + toks % PAGE) * kv_heads + kv_head
        k = tl.load(k_ptr + row[None, :] * HEAD_DIM + offs_d[:, None], mask=t_ok[None, :], other=0.0)
        qk = tl.where(t_ok[None, :], tl.dot(q, k) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / tl.where(g_ok, l_i, 1.0)[:, None]
    tl.store(
        o_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=g_ok[:, None],
    )


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch, q_heads, head_dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    o = torch.empty_like(q)
    longest = int(seq_lens.max())
    block_n = 16 if longest <= 16 * page else 64
    _decode[(batch, kv_heads)](
        q.contiguous(),
        k_cache.contiguous(),
        v_cache.contiguous(),
        block_table.contiguous(),
        seq_lens.contiguous(),
        o,
        sm_scale * LOG2E,
        block_table.shape[1],
        q_heads,
        kv_heads,
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        PAGE=page,
        BLOCK_N=block_n,
        num_warps=4,
    )
    return o
