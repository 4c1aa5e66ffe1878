"""VIOLATES batch invariance: split-KV when batch·heads cannot fill the GPU.

When the launch has fewer (sequence, head, query block) programs than the GPU
has streaming multiprocessors, the keys are split into ``num_splits`` ranges
that run in parallel, and the partial softmax results are merged afterwards
(the flash-decoding trick applied to prefill). ``num_splits`` comes from the
batch size, so a sequence's keys are summed in a different grouping, and its
output bits change, depending on how many sequences share the launch.
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
def _flash_forward_split(
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
    tiles_per_split,
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
    kv_heads = q_heads // group
    q_base = q_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM
    kv_offset = (seq * kv_heads + kv_head).to(tl.int64) * seq_len * HEAD_DIM

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(
        q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len, other=0.0
    )

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    lo = split * tiles_per_split * BLOCK_N
    hi = tl.minimum(lo + tiles_per_split * BLOCK_N, seq_len)
    if CAUSAL:
        hi = tl.minimum(hi, (m_block + 1) * BLOCK_M)
    for start_n in range(lo, hi, BLOCK_N):
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
        # A row may see no key yet in this split: keep its max at 0 for the exponentials.
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
    row_ok = offs_m < seq_len
    tl.store(acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=row_ok[:, None])
    tl.store(max_ptr + row, m_i, mask=row_ok)
    tl.store(sum_ptr + row, l_i, mask=row_ok)


def kernel(q, k, v, causal, sm_scale):
    batch, q_heads, seq_len, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    block_m, block_n = (128, 64) if head_dim >= 64 else (32, 16)
    m_blocks = triton.cdiv(seq_len, block_m)
    n_tiles = triton.cdiv(seq_len, block_n)
    # Fill the machine: as many key splits as idle SMs allow.
    programs = batch * q_heads * m_blocks
    num_splits = max(1, min(MAX_SPLITS, n_tiles, _sm_count(q.device) // programs))
    tiles_per_split = triton.cdiv(n_tiles, num_splits)
    part_acc = torch.empty(
        (batch, q_heads, num_splits, seq_len, head_dim), dtype=torch.float32, device=q.device
    )
    part_max = torch.empty((batch, q_heads, num_splits, seq_len), dtype=torch.float32, device=q.device)
    part_sum = torch.empty((batch, q_heads, num_splits, seq_len), dtype=torch.float32, device=q.device)
    _flash_forward_split[(m_blocks, batch * q_heads, num_splits)](
        q,
        k,
        v,
        part_acc,
        part_max,
        part_sum,
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // kv_heads,
        num_splits,
        tiles_per_split,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8 if head_dim >= 64 else 4,
    )
    # Merge the splits: rescale each to the common max and add them up.
    m_all = part_max.max(dim=2, keepdim=True).values
    weight = torch.exp2(part_max - m_all)
    total = (part_sum * weight).sum(dim=2)
    out = (part_acc * weight.unsqueeze(-1)).sum(dim=2) / total.unsqueeze(-1)
    return out.to(q.dtype)
