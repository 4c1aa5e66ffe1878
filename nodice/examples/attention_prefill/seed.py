"""Attention prefill seed: flash-attention forward with online softmax, no split-KV.

One program owns BLOCK_M queries of one (sequence, query head) and walks the
keys from the first to the last tile in order, rescaling its running max, sum
and accumulator as it goes. Batch-invariant because a query row's arithmetic
(tile sizes, tile order, the final division) depends only on the head dim and
the sequence length (and the dtype), never on how many sequences or heads
share the launch.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _flash_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    qk_scale,
    seq_len,
    q_heads,
    group,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq_head = tl.program_id(1)
    seq = seq_head // q_heads
    q_head = seq_head % q_heads
    kv_head = q_head // group
    kv_heads = q_heads // group
    q_base = q_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM
    kv_offset = (seq * kv_heads + kv_head).to(tl.int64) * seq_len * HEAD_DIM

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Causal rows never look past their own block: stop at its end.
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        # K is read transposed ([HEAD_DIM, BLOCK_N]) so that Q·Kᵀ is one tl.dot.
        k = tl.load(
            k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0
        )
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        # Every row sees key 0 in the first tile, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + kv_offset + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0
        )
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    o_base = o_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM
    tl.store(
        o_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


def kernel(q, k, v, causal, sm_scale):
    batch, q_heads, seq_len, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    # Tiles depend on the head dim and dtype only: Hopper-sized for real heads
    # (halved for 4-byte elements, to fit shared memory), small for tiny heads.
    if head_dim < 64:
        block_m, block_n = 32, 16
    elif q.element_size() <= 2:
        block_m, block_n = 128, 64
    else:
        block_m, block_n = 64, 32
    num_warps = 8 if head_dim >= 64 else 4
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads)
    _flash_forward[grid](
        q,
        k,
        v,
        o,
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // kv_heads,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=num_warps,
        num_stages=3 if head_dim >= 64 and q.element_size() <= 2 else 2,
    )
    return o
