"""VIOLATES batch invariance: the key tile is chosen from the longest sequence in the batch.

Packs whose longest sequence is long get a key tile four times as wide
(fewer loop trips over the long sequence's keys, better MMA efficiency), packs
of short sequences keep the narrow one, the way varlen libraries pick a kernel
configuration from ``max_seqlen_k``. The online softmax then folds every
sequence's keys in differently sized chunks, so a short sequence's output bits
depend on whether a long prompt shares its launch.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _varlen_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    cu_q_ptr,
    cu_k_ptr,
    qk_scale,
    q_heads,
    group,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq = tl.program_id(1)
    q_head = tl.program_id(2)
    kv_heads = q_heads // group
    kv_head = q_head // group
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    k_start = tl.load(cu_k_ptr + seq)
    k_len = tl.load(cu_k_ptr + seq + 1) - k_start
    q_row = q_heads * HEAD_DIM  # elements between two tokens of q and o
    k_row = kv_heads * HEAD_DIM

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < q_len
    q_base = q_ptr + q_start.to(tl.int64) * q_row + q_head * HEAD_DIM
    q = tl.load(q_base + offs_m[:, None] * q_row + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM
    v_base = v_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Causal: query i sees keys up to i + (k_len - q_len) (aligned bottom-right), so a block
    # stops at its last row's horizon; a block past the sequence's end walks no keys at all.
    hi = k_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M + k_len - q_len, k_len)
    hi = tl.where(m_block * BLOCK_M < q_len, hi, 0)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < k_len
        # K read transposed ([HEAD_DIM, BLOCK_N]) so that Q·Kᵀ is one tl.dot.
        k = tl.load(k_base + cols[None, :] * k_row + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + (k_len - q_len))
        qk = tl.where(keep, qk, float("-inf"))
        # Every row sees key 0 in the first tile, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * k_row + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    # Rows past the sequence's end saw no keys: divide by 1, not 0 (they are not stored).
    out = acc / tl.where(row_ok, l_i, 1.0)[:, None]
    o_base = o_ptr + q_start.to(tl.int64) * q_row + q_head * HEAD_DIM
    tl.store(
        o_base + offs_m[:, None] * q_row + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


def kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale):
    _, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    block_m = 32 if head_dim < 64 else 64
    # Long packs amortise the loop over wide key tiles; short ones keep latency low.
    block_n = 64 if max_seqlen_k > 128 else 16
    grid = (triton.cdiv(max_seqlen_q, block_m), cu_seqlens_q.shape[0] - 1, q_heads)
    _varlen_forward[grid](
        q,
        k,
        v,
        o,
        cu_seqlens_q,
        cu_seqlens_k,
        sm_scale * LOG2E,
        q_heads,
        q_heads // kv_heads,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8 if head_dim >= 64 else 4,
    )
    return o
