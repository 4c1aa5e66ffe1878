"""VIOLATES batch invariance: split-KV when the batch's programs cannot fill the GPU.

When the pack has fewer (sequence, head) pairs than the GPU has streaming
multiprocessors, every sequence's keys are cut into ``num_splits`` ranges that
run as separate programs, and their partial softmax results are merged
afterwards — FlashAttention-2's varlen split heuristic, which compares
batch·heads with the SM count. ``num_splits`` comes from the batch size, so a
sequence's keys are summed in a different grouping, and its output bits
change, depending on how many sequences share the launch.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_SPLITS = 8


def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # an H100/H200, for runs under the interpreter


@triton.jit
def _varlen_forward_split(
    q_ptr,
    k_ptr,
    v_ptr,
    acc_ptr,
    m_ptr,
    l_ptr,
    cu_q_ptr,
    cu_k_ptr,
    qk_scale,
    q_heads,
    group,
    num_splits,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq = tl.program_id(1)
    head_split = tl.program_id(2)
    q_head = head_split // num_splits
    split = head_split % num_splits
    kv_heads = q_heads // group
    kv_head = q_head // group
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    k_start = tl.load(cu_k_ptr + seq)
    k_len = tl.load(cu_k_ptr + seq + 1) - k_start
    q_row = q_heads * HEAD_DIM
    k_row = kv_heads * HEAD_DIM
    total_q = tl.load(cu_q_ptr + tl.num_programs(1))

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < q_len
    q_base = q_ptr + q_start.to(tl.int64) * q_row + q_head * HEAD_DIM
    q = tl.load(q_base + offs_m[:, None] * q_row + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM
    v_base = v_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM

    # This split's key range: whole tiles, as many as the split count leaves per split.
    tiles = tl.cdiv(k_len, BLOCK_N)
    per_split = tl.cdiv(tiles, num_splits) * BLOCK_N
    lo = split * per_split
    hi = tl.minimum(lo + per_split, k_len)
    if CAUSAL:
        hi = tl.minimum(hi, (m_block + 1) * BLOCK_M + k_len - q_len)
    hi = tl.where(m_block * BLOCK_M < q_len, hi, lo)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < k_len
        k = tl.load(k_base + cols[None, :] * k_row + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + (k_len - q_len))
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        # A row whose keys in this tile are all masked keeps m = -inf: guard the rescale.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * k_row + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    # Partials are laid out [split, token, head]: rows past the sequence are not stored.
    slot = (split * total_q + q_start + offs_m).to(tl.int64) * q_heads + q_head
    tl.store(acc_ptr + slot[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=row_ok[:, None])
    tl.store(m_ptr + slot, m_i, mask=row_ok)
    tl.store(l_ptr + slot, l_i, mask=row_ok)


def kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale):
    total_q, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    num_seqs = cu_seqlens_q.shape[0] - 1
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    block_m, block_n = (32, 16) if head_dim < 64 else (64, 32)
    # Too few (sequence, head) programs to fill the GPU: split the keys until they do
    # (one split once the pack has as many pairs as SMs).
    programs = num_seqs * q_heads
    num_splits = max(1, min(MAX_SPLITS, triton.cdiv(_sm_count(q.device), programs)))
    acc = torch.empty((num_splits, total_q, q_heads, head_dim), device=q.device, dtype=torch.float32)
    m = torch.empty((num_splits, total_q, q_heads), device=q.device, dtype=torch.float32)
    l_sum = torch.empty_like(m)
    grid = (triton.cdiv(max_seqlen_q, block_m), num_seqs, q_heads * num_splits)
    _varlen_forward_split[grid](
        q,
        k,
        v,
        acc,
        m,
        l_sum,
        cu_seqlens_q,
        cu_seqlens_k,
        sm_scale * LOG2E,
        q_heads,
        q_heads // kv_heads,
        num_splits,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8 if head_dim >= 64 else 4,
    )
    # Merge the splits: rescale each to the common max (split 0 always holds key 0, so it is finite).
    m_max = m.max(dim=0).values
    scale = torch.exp2(m - m_max)
    out = (acc * scale[..., None]).sum(dim=0) / (l_sum * scale).sum(dim=0)[..., None]
    return out.to(q.dtype)
