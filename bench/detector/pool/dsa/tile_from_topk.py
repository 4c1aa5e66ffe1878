"""Sparse MLA with the index tile chosen from the top-k width."""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_H = 16  # heads per program (tl.dot needs 16 rows)


@triton.jit
def _sparse_mla_forward(
    q_ptr,
    kv_ptr,
    idx_ptr,
    o_ptr,
    qk_scale,
    heads,
    topk,
    d_qk,
    d_v,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LATENT: tl.constexpr,
    ROPE: tl.constexpr,
):
    row = tl.program_id(0)
    head_block = tl.program_id(1)
    offs_h = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_v = tl.arange(0, LATENT)
    offs_r = tl.arange(0, ROPE)
    head_ok = offs_h < heads
    latent_ok = offs_v < d_v
    rope_ok = offs_r < d_qk - d_v

    # The row's queries, latent and RoPE parts apart (each a power-of-two tile for tl.dot).
    q_base = q_ptr + row.to(tl.int64) * heads * d_qk + offs_h[:, None] * d_qk
    q_nope = tl.load(q_base + offs_v[None, :], mask=head_ok[:, None] & latent_ok[None, :], other=0.0)
    q_rope = tl.load(q_base + d_v + offs_r[None, :], mask=head_ok[:, None] & rope_ok[None, :], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, LATENT], dtype=tl.float32)
    idx_base = idx_ptr + row.to(tl.int64) * topk
    for start in range(0, topk, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        slot = tl.load(idx_base + cols, mask=cols < topk, other=-1)
        used = slot >= 0
        token = kv_ptr + tl.maximum(slot, 0).to(tl.int64)[:, None] * d_qk
        k_nope = tl.load(token + offs_v[None, :], mask=used[:, None] & latent_ok[None, :], other=0.0)
        k_rope = tl.load(token + d_v + offs_r[None, :], mask=used[:, None] & rope_ok[None, :], other=0.0)
        scores = tl.dot(q_nope, tl.trans(k_nope)) + tl.dot(q_rope, tl.trans(k_rope))
        scores = tl.where(used[None, :], scores * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        # A tile of unused entries before any used one leaves m at -inf: rescale from 0 then.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(scores - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k_nope.dtype), k_nope, acc * alpha[:, None])
        m_i = m_new
    # A row with no used entry attends to nothing: 0, not 0/0.
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_base = o_ptr + row.to(tl.int64) * heads * d_v + offs_h[:, None] * d_v
    tl.store(
        o_base + offs_v[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=head_ok[:, None] & latent_ok[None, :],
    )


def kernel(q, kv_cache, indices, cu_seqlens_q, sm_scale, d_v):
    rows, heads, d_qk = q.shape
    topk = indices.shape[1]
    q, kv_cache, indices = q.contiguous(), kv_cache.contiguous(), indices.contiguous()
    o = torch.empty((rows, heads, d_v), device=q.device, dtype=q.dtype)
    # The index tile depends on the latent width only: 32 gathered tokens of 512 columns on
    # DeepSeek's shapes, 16 for the interpreter's tiny ones.
    block_n = 32 if topk >= 64 else 16
    grid = (rows, triton.cdiv(heads, BLOCK_H))
    _sparse_mla_forward[grid](
        q,
        kv_cache,
        indices,
        o,
        sm_scale * LOG2E,
        heads,
        topk,
        d_qk,
        d_v,
        BLOCK_H=BLOCK_H,
        BLOCK_N=block_n,
        LATENT=triton.next_power_of_2(d_v),
        ROPE=max(16, triton.next_power_of_2(d_qk - d_v)),
        num_warps=8 if d_v >= 128 else 4,
    )
    return o
