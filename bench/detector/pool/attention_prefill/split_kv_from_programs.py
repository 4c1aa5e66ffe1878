"""Split-KV flash attention sized to keep eight programs per head busy."""

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
    kv_head = (seq_head % q_heads) // group
    kv_offset = (seq * (q_heads // group) + kv_head).to(tl.int64) * seq_len * HEAD_DIM
    q_base = seq_head.to(tl.int64) * seq_len * HEAD_DIM
    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(
        q_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0
    )
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        k = tl.load(
            k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0
        )
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
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
    tl.store(
        o_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


@triton.jit
def _flash_split(
    q_ptr,
    k_ptr,
    v_ptr,
    acc_ptr,
    max_ptr,
    sum_ptr,
    qk_scale,
    seq_len,
    q_heads,
    group,
    num_splits,
    keys_per_split,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq_head = tl.program_id(1)
    split = tl.program_id(2)
    seq = seq_head // q_heads
    kv_head = (seq_head % q_heads) // group
    kv_offset = (seq * (q_heads // group) + kv_head).to(tl.int64) * seq_len * HEAD_DIM
    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(
        q_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        mask=row_ok[:, None],
        other=0.0,
    )
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, seq_len)
    if CAUSAL:
        hi = tl.minimum(hi, (m_block + 1) * BLOCK_M)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi
        k = tl.load(
            k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0
        )
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + kv_offset + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0
        )
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    row = (seq_head * num_splits + split).to(tl.int64) * seq_len + offs_m
    tl.store(acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=row_ok[:, None])
    tl.store(max_ptr + row, m_i, mask=row_ok)
    tl.store(sum_ptr + row, l_i, mask=row_ok)


def _split_attention(q, k, v, causal, sm_scale, num_splits, block_m=64, block_n=16):
    batch, q_heads, seq_len, head_dim = q.shape
    keys_per_split = triton.cdiv(triton.cdiv(seq_len, num_splits), block_n) * block_n
    f32 = dict(dtype=torch.float32, device=q.device)
    part_acc = torch.empty((batch, q_heads, num_splits, seq_len, head_dim), **f32)
    part_max = torch.empty((batch, q_heads, num_splits, seq_len), **f32)
    part_sum = torch.empty((batch, q_heads, num_splits, seq_len), **f32)
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads, num_splits)
    _flash_split[grid](
        q,
        k,
        v,
        part_acc,
        part_max,
        part_sum,
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // k.shape[1],
        num_splits,
        keys_per_split,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
    )
    # Rescale every split to the common running max and add them up.
    m_all = part_max.max(dim=2, keepdim=True).values
    weight = torch.exp2(part_max - m_all)
    total = (part_sum * weight).sum(dim=2)
    return ((part_acc * weight.unsqueeze(-1)).sum(dim=2) / total.unsqueeze(-1)).to(q.dtype)


PROGRAMS_PER_HEAD = 8


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    batch, _, seq_len, _ = q.shape
    m_blocks = triton.cdiv(seq_len, 64)
    num_splits = max(1, PROGRAMS_PER_HEAD // (batch * m_blocks))
    return _split_attention(q, k, v, causal, sm_scale, num_splits)
